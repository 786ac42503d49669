"""Every method under the automatic trace (tracker.source=auto), solved for real on numpy and on torch: the same
answer as under the hand trace, every read after a write of its buffer, replayed steps equal to recording every
step, the per-method default source, and the ways a value leaves the arrays are each an event."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sweep import job
from sweep.config.check import check_job
from sweep.errors import ConfigError
from sweep.methods.base import Context
from sweep.methods.gf2 import pack_rows, packed_rows
from sweep.methods.step_templates import StepTemplates
from sweep.record.tags import TRACE_SOURCE_TAG
from sweep.trace.auto import NumpyTracer, TorchTracer
from sweep.trace.auto.packed import PackedInt
from sweep.trace.scope import Scope
from sweep.trace.source import Source, recording
from sweep.trace.trace import OP_KINDS, READ, Trace
from tests.conftest import compose
from tests.test_method_traces import ARMS, BASE, cold_reads, solve_with
from tests.test_trace_templates import TRACKERS, assert_same

METHOD_PROBLEMS = sorted({(m, p) for m, p, _ in ARMS})


@pytest.mark.parametrize("device", ["cpu", "torch_cpu"])
@pytest.mark.parametrize("method, problem", METHOD_PROBLEMS)
def test_every_method_and_problem_traces_itself(method, problem, device):
    """The whole solve (all_steps) and the published step: the answer of the hand-traced run, a trace whose reads
    all follow a write, that reads every input it names, counts known operations, and is larger than nothing."""
    for scope in ("all_steps", "published"):
        auto, got = solve_with(method, problem, scope=scope, device=device, source="auto")
        hand, ref = solve_with(method, problem, scope=scope, device=device)
        assert (got.secret_found, got.accuracy, got.epochs) == (ref.secret_found, ref.accuracy, ref.epochs)
        assert cold_reads(auto) == set(), (method, scope)
        assert set(auto.compute_ops) <= set(OP_KINDS) and sum(auto.compute_ops.values()) > 0
        read = {name for op, name, _ in auto.events if op == READ}
        assert {"x", "y"} & read or "X" in read, read  # the data it was given, under the names the hand trace uses
        assert len(auto) >= len(hand) > 0, (method, scope)


def replayed(source: str, *overrides: str) -> tuple[Trace, list[Trace]]:
    trace = Trace()
    cfg = compose(*overrides)
    prob = job.build(cfg.problem)
    ctx = Context(prob, prob.generate(), job.make_backend(cfg.device), trace, Scope.ALL_STEPS, job.build(cfg.variant))
    ctx.source = Source(source)
    return trace, list(job.build(cfg.method).solve(ctx).traces.values())


@pytest.mark.parametrize(
    "overrides",
    [("variant=standard",), ("method=sign_sgd",), ("method=curriculum", "method.schedule=[4]"), ("device=torch_cpu",)],
    ids=["standard", "sign_sgd", "curriculum", "torch"],
)
def test_replayed_auto_steps_equal_recorded_steps(overrides, monkeypatch):
    """SGD's loop records each kind of step once under the tracer and replays it: the same trace, escapes and
    figures as tracing every step (so scope=all_steps stays cheap under auto)."""
    small = ("method.hidden=8", "problem.n_bits=6", "problem.n_train=50", "method.batch_size=4")
    small += ("method.max_epochs=6", "method.lr=0.5", "method.target_accuracy=1.0")
    trace, epochs = replayed("auto", *small, *overrides)
    monkeypatch.setattr(StepTemplates, "replay", False)
    ref, ref_epochs = replayed("auto", *small, *overrides)
    assert trace.events == ref.events and trace.compute_ops == ref.compute_ops
    assert trace.escaped == ref.escaped > 0  # the margin test's bool() in every step
    assert [e.events for e in epochs] == [e.events for e in ref_epochs]
    for tracker in TRACKERS:
        assert_same(tracker.summarize(trace), tracker.summarize(ref))


def test_default_source_is_the_methods_own():
    """Methods with a published trace protocol keep the hand trace; the exact solvers default to auto; an
    override wins, and a wrong value is refused before any job."""
    defaults = {m: job.build_job(compose(f"method={m}", f"problem={p}")).ctx.source for m, p in METHOD_PROBLEMS}
    assert {m for m, s in defaults.items() if s == "hand"} == {"sgd", "sign_sgd", "curriculum", "forward_forward"}
    assert {m for m, s in defaults.items() if s == "auto"} == {"gf2", "km", "fourier", "smt", "ols", "solver"}
    assert job.build_job(compose("method=gf2", "tracker.source=hand")).ctx.source is Source.HAND
    assert job.build_job(compose("method=sgd", "tracker.source=auto")).ctx.source is Source.AUTO
    allowed = r"tracker.source='automatic' is not allowed: did you mean auto\? expected one of method, hand, auto"
    with pytest.raises(ConfigError, match=allowed):
        check_job(job.job_config(compose("tracker.source=automatic")))


def test_auto_run_logs_its_escapes():
    """A run under auto logs how many values left the arrays; a hand run has nothing to say about it."""
    r = job.run(compose("method=gf2", *BASE, "tracker=ard"))
    assert r.metrics["escaped"] > 0 and r.metrics["ard"] > 0 and r.tags[TRACE_SOURCE_TAG] == "auto"
    hand = job.run(compose("method=gf2", *BASE, "tracker=ard", "tracker.source=hand"))
    assert "escaped" not in hand.metrics and hand.tags[TRACE_SOURCE_TAG] == "hand"


def test_gf2_packed_rows_are_pack_rows_and_their_xors_are_traced():
    rng = np.random.RandomState(3)
    x, y = rng.choice([-1.0, 1.0], size=(7, 70)), rng.choice([-1.0, 1.0], size=7)  # 71 bits: two words a row
    trace = Trace()
    with recording(trace, "auto", "numpy", loaded={"x": x, "y": y}) as r:
        rows = list(packed_rows(r, r["x"], r["y"]))
        assert all(isinstance(row, PackedInt) for row in rows)
        assert [int.__int__(row) for row in rows] == list(pack_rows(x, y))
        before = len(trace._open)
        z = rows[0] ^ rows[1]
        flag = bool(z)
    assert isinstance(z, PackedInt) and flag == (int.__int__(z) != 0)
    assert trace._open[before:] == [(READ, "A", 2), (READ, "A", 2), (1, z.name, 2), (READ, z.name, 2)]
    assert trace.escaped == 1 and trace.compute_ops["xor"] >= 2


def escape_routes_numpy(x):
    return [
        lambda: np.asarray(x).sum(),  # covered while open: stays traced
        lambda: np.array(x)[0],  # a copy: a read of x
        lambda: x.item(0),
        lambda: float(x[1]),
        lambda: x.tolist(),
        lambda: list(x),
        lambda: x.tobytes(),
        lambda: np.ascontiguousarray(x) * 2.0,
    ]


def escape_routes_torch(x):
    return [
        lambda: x.sum().item(),
        lambda: float(x[1]),
        lambda: x.tolist(),
        lambda: x.numpy(),
        lambda: np.asarray(x),
        lambda: bool(x[0] > 0),
    ]


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_every_way_out_of_the_arrays_is_an_event(library):
    """A read through np.asarray, a copy, .item(), float(), tolist(), iteration, tobytes(), .numpy(): each is a
    read of the named buffer (so a tracker prices it), and a Python value taken out is counted in escaped."""
    data = np.arange(1.0, 5.0)
    for i in range(len(escape_routes_numpy(data) if library == "numpy" else escape_routes_torch(torch.ones(1)))):
        trace = Trace()
        if library == "numpy":
            with NumpyTracer(trace) as t:
                escape_routes_numpy(t.wrap(data, "x"))[i]()
        else:
            x = torch.as_tensor(data.copy())
            with TorchTracer(trace, {"x": x}) as t:
                escape_routes_torch(x)[i]()
        assert (READ, "x") in [(op, name) for op, name, _ in trace.events], (library, i, trace.events)
    # the ones that take Python values out count them
    trace = Trace()
    with NumpyTracer(trace) as t:
        x = t.wrap(data, "x")
        x.item(0), float(x[1]), x.tolist(), list(x)
    assert t.escaped == 1 + 1 + 4 + 4 == trace.escaped


def test_the_trace_sources_benchmark_runs_to_its_end_past_a_method_of_one_source():
    """docs/auto_traces.md's `benchmarks/trace_sources.py` printed its table, then ended in a 17-line traceback:
    method=solver refuses tracker.source=hand. A method of one source is left out in one line."""
    import subprocess
    import sys

    from sweep.paths import PROJECT_ROOT

    cmd = [sys.executable, "benchmarks/trace_sources.py", "--methods", "km,solver", "problem.n_bits=8"]
    p = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert any(line.startswith("| km | sparse_parity | ") for line in p.stdout.splitlines()), p.stdout
    assert p.stderr.splitlines()[-1].startswith("trace_sources: method=solver left out: tracker.source='hand' is no")
