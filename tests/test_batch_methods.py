"""solve_batch (issue 25): R runs of one method solved on a leading runs axis give each run its solo result.

Under float64 every run's accuracy, epochs, secret and extra figures equal those of the same job solved alone,
its per-epoch curves within 1e-9 relative, and its traced step (tracker.scope) is its own: the same events and
the same tracker figures. A divergent run's outcome is its solo outcome and leaves the others untouched.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest
from hydra.utils import get_class

from sweep import job
from sweep.methods.base import Outcome
from tests.conftest import compose

# the torch path on a GPU too, where this machine has one (a session lent a GPU runs these there)
GPU = ["cuda"] if importlib.util.find_spec("torch") and __import__("torch").cuda.is_available() else []
SMALL = ("problem.n_bits=10", "problem.n_train=500", "method.hidden=64")
# (method, problem, its own extra overrides, (seed, lr, wd) of each run)
CASES = {
    "sgd": ("sparse_parity", (), [(1, 0.1, 0.01), (2, 0.05, 0.0), (3, 0.1, 0.01), (4, 0.2, 0.001)]),
    "sign_sgd": ("sparse_and", (), [(1, 0.01, 0.01), (2, 0.005, 0.0), (3, 0.02, 0.001)]),
    "curriculum": ("sparse_parity", ("method.schedule=[6]",), [(1, 0.1, 0.01), (5, 0.05, 0.0), (3, 0.1, 0.001)]),
    "sgd_sum": ("sparse_sum", (), [(1, 0.1, 0.01), (2, 0.05, 0.0), (3, 0.02, 0.001)]),
}


def jobs(method: str, problem: str, runs, *overrides: str) -> list[job.Job]:
    name = "sgd" if method == "sgd_sum" else method
    return [
        job.build_job(
            compose(
                f"method={name}",
                f"problem={problem}",
                *SMALL,
                *overrides,
                f"problem.seed={s}",
                f"method.lr={lr}",
                f"method.wd={wd}",
            )
        )
        for s, lr, wd in runs
    ]


def batch(js: list[job.Job]) -> list[Outcome]:
    outs = type(js[0].method).solve_batch([j.method for j in js], [j.ctx for j in js])
    assert len(outs) == len(js)
    for o in outs:
        assert isinstance(o, Outcome), o
    return [o.finalize() for o in outs]


def assert_same(batched: Outcome, solo: Outcome) -> None:
    assert (batched.accuracy, batched.epochs, batched.secret_found) == (solo.accuracy, solo.epochs, solo.secret_found)
    assert batched.train_accuracy == solo.train_accuracy
    assert batched.extra == solo.extra
    assert batched.curves.keys() == solo.curves.keys()
    for k, v in solo.curves.items():
        np.testing.assert_allclose(batched.curves[k], v, rtol=1e-9, atol=0, err_msg=k)


@pytest.mark.parametrize("device", ["cpu", "torch_cpu", "torch_cpu:counter", *GPU])
@pytest.mark.parametrize("method", sorted(CASES))
def test_batch_equals_solo_runs(method, device):
    """On each device, with the draws on the host (RandomState) and on the device (device.rng=counter: cuda's
    default; here on torch's CPU)."""
    problem, extra, runs = CASES[method]
    device, _, rng = device.partition(":")
    on = ("tracker=none", f"device={device}", "device.dtype=float64", *extra)  # cuda's default is float32
    on += (f"device.rng={rng}",) if rng else ()
    outs = batch(jobs(method, problem, runs, *on))
    solos = [j.method.solve(j.ctx).finalize() for j in jobs(method, problem, runs, *on)]
    assert len({o.epochs for o in solos}) > 1  # the runs stop at different epochs: each has its own early stop
    for b, s in zip(outs, solos):
        assert_same(b, s)


@pytest.mark.parametrize("variant", ["fused", "perlayer"])
def test_batch_follows_the_variant(variant):
    """fused reorders standard's updates (same numbers); perlayer takes dh from the updated W2 (other numbers)."""
    problem, _, runs = CASES["sgd"]
    outs = batch(jobs("sgd", problem, runs, "tracker=none", f"variant={variant}"))
    for b, j in zip(outs, jobs("sgd", problem, runs, "tracker=none", f"variant={variant}")):
        assert_same(b, j.method.solve(j.ctx).finalize())


@pytest.mark.parametrize("scope", ["published", "init_sample0"])
@pytest.mark.parametrize("method", ["sgd", "curriculum", "sgd_sum"])
def test_each_run_records_its_own_trace(method, scope):
    problem, extra, runs = CASES[method]
    overrides = ("tracker=energy", f"tracker.scope={scope}", *extra)
    js = jobs(method, problem, runs, *overrides)
    batch(js)
    solos = jobs(method, problem, runs, *overrides)
    for b, s in zip(js, solos):
        s.method.solve(s.ctx)
        assert len(b.ctx.trace) > 0
        assert b.ctx.trace.events == s.ctx.trace.events
        assert b.ctx.trace.compute_ops == s.ctx.trace.compute_ops
        assert b.tracker.summarize(b.ctx.trace).metrics == s.tracker.summarize(s.ctx.trace).metrics


@pytest.mark.parametrize("method", ["sgd", "sign_sgd"])
def test_a_divergent_run_fails_alone(method):
    """lr * wd = 10: the weights blow up to NaN in that run only; it ends as its solo run does, the others
    as theirs."""
    runs = [(1, 0.1 if method == "sgd" else 0.01, 0.01), (2, 1e3, 0.01), (3, 0.05 if method == "sgd" else 0.01, 0.0)]
    overrides = ("tracker=none", "method.max_epochs=30", "problem=sparse_parity")
    with np.errstate(all="ignore"):
        outs = batch(jobs(method, "sparse_parity", runs, *overrides))
        solos = [j.method.solve(j.ctx).finalize() for j in jobs(method, "sparse_parity", runs, *overrides)]
    assert outs[1].accuracy == solos[1].accuracy < 1.0 and outs[1].epochs == solos[1].epochs == 30
    if method == "sgd":  # its weights are NaN by the end; sign_sgd's steps are bounded by lr, so only huge
        assert np.isnan(outs[1].curves["train_loss"][-1]) and np.isnan(solos[1].curves["train_loss"][-1])
    for i in (0, 2):
        assert np.isfinite(outs[i].curves["train_loss"]).all()
        assert_same(outs[i], solos[i])


def test_batchable_says_no_where_the_batch_cannot_trace_or_compute_exactly():
    sgd = get_class(compose("method=sgd").method._target_)
    assert sgd.batchable(job.build_job(compose("method=sgd", "tracker=energy")).ctx)
    assert sgd.batchable(job.build_job(compose("method=sgd", "variant=perlayer")).ctx)
    for no in (
        ("tracker=energy", "tracker.scope=all_steps"),
        ("variant=tiled",),
        ("device=torch_cpu", "device.compile=true"),
    ):
        assert not sgd.batchable(job.build_job(compose("method=sgd", *no)).ctx), no


def test_solve_batch_refuses_runs_that_differ_in_a_shared_key():
    js = jobs("sgd", "sparse_parity", [(1, 0.1, 0.01)], "tracker=none") + jobs(
        "sgd", "sparse_parity", [(2, 0.1, 0.01)], "tracker=none", "method.hidden=32"
    )
    with pytest.raises(ValueError, match="more than lr and wd"):
        type(js[0].method).solve_batch([j.method for j in js], [j.ctx for j in js])


def test_vectorised_keys_are_declared_on_the_classes():
    for m in ("sgd", "sign_sgd", "curriculum"):
        cls = get_class(compose(f"method={m}").method._target_)
        assert cls.vectorised == ("problem.seed", "method.lr", "method.wd") and hasattr(cls, "solve_batch")
    for m in ("gf2", "km", "fourier", "smt", "ols"):
        cls = get_class(compose(f"method={m}").method._target_)
        assert cls.vectorised == ("problem.seed",) and not hasattr(cls, "solve_batch"), m
    ff = get_class(compose("method=forward_forward").method._target_)
    assert ff.vectorised == ()  # MethodBase's default: its runs never share a batch


def test_runs_stepped_in_cache_sized_chunks_keep_their_results(monkeypatch):
    """Four runs stepped three and one at a time (batched.cache_chunk) give the same as one group of four."""
    from sweep.methods import batched

    monkeypatch.setattr(batched, "cache_chunk", lambda be, floats: 3)
    problem, _, runs = CASES["sgd"]
    outs = batch(jobs("sgd", problem, runs, "tracker=none"))
    for b, j in zip(outs, jobs("sgd", problem, runs, "tracker=none")):
        assert_same(b, j.method.solve(j.ctx).finalize())


def test_orders_drawn_on_several_threads_are_each_runs_own():
    """On a GPU each epoch's batch orders are drawn on the host's cores (batched.orders): every run still gets
    the order its own rng gives, and its rng ends where the solo run's does."""
    from types import SimpleNamespace

    from sweep.methods import batched

    ids = np.arange(0, 600, 2)  # >= 256 running runs, not all of them
    threaded = [np.random.RandomState(s) for s in range(600)]
    alone = [np.random.RandomState(s) for s in range(600)]
    for _ in range(2):
        got = batched.orders(SimpleNamespace(device="cuda:0"), threaded, ids, 50)
        assert (got == np.stack([alone[r].permutation(50) for r in ids])).all()
    assert all((threaded[r].get_state()[1] == alone[r].get_state()[1]).all() for r in range(600))


@pytest.mark.parametrize("group", [None, 2])
@pytest.mark.parametrize("device", ["cpu", "torch_cpu", *GPU])
def test_each_runs_stopping_test_is_its_solo_test(device, group, monkeypatch):
    """batched.reached tests a run on the later chunks of its test set only while it has no error, as its solo
    run's test does: runs right everywhere, wrong only in the last chunk, wrong at once, in one batch; all runs
    at once or in groups of two (cache_chunk); and against a target below 1 (test accuracy >= target)."""
    from sweep.methods import batched
    from sweep.methods.sgd import SGD

    if group:
        monkeypatch.setattr(batched, "cache_chunk", lambda be, floats: group)

    j = jobs("sgd", "sparse_parity", [(1, 0.1, 0.01)], "tracker=none", f"device={device}", "device.dtype=float64")[0]
    be, xp, m = j.backend, j.backend.xp, j.method
    rng = np.random.RandomState(0)
    R, T, H, n = 5, 300, 8, 10  # 300 test samples: chunks of 64, the last one short
    p = {"W1": rng.randn(R, H, n), "b1": rng.randn(R, H), "W2": rng.randn(R, 1, H), "b2": rng.randn(R, 1)}
    xt = rng.choice([-1.0, 1.0], size=(R, T, n))
    pt, xtt = {k: be.asarray(v) for k, v in p.items()}, be.asarray(xt)
    yt = np.where(be.to_numpy(batched.forward(xp, pt, xtt)[2]) >= 0, 1.0, -1.0)  # every run right everywhere
    yt[1, -1] *= -1  # run 1 wrong on the last sample only
    yt[2, 0] *= -1  # run 2 wrong at once
    yt[4, 100] *= -1  # run 4 wrong in the second chunk
    tested, forward = [], batched.forward  # how many runs each chunk's forward takes
    monkeypatch.setattr(batched, "forward", lambda xp, q, x: tested.append(x.shape[0]) or forward(xp, q, x))
    got = batched.reached(be, pt, xtt, be.asarray(yt), 1.0)
    monkeypatch.setattr(batched, "forward", forward)
    solo = [SGD.reached(m, xp, batched.run_slice(pt, r), xtt[r], be.asarray(yt[r])) for r in range(R)]
    assert list(got) == solo == [True, False, False, True, False]
    # chunks of 64 of 300 samples: all 5 runs, then without run 2 (its error is in the first), then without run 4
    # (second); runs 0, 1 and 3 to the end. In groups of two: (0, 1) to the end, (2, 3) then 3 alone, (4) twice.
    assert tested == ([5, 4, 3, 3, 3] if not group else [2] * 5 + [2, 1, 1, 1, 1] + [1, 1])
    yt[3, :2] *= -1  # run 3: 298 of 300 right, below a target of 0.995; runs 1, 2 and 4 (299 of 300) reach it
    m = dataclasses.replace(m, target_accuracy=0.995)
    got = batched.reached(be, pt, xtt, be.asarray(yt), 0.995)
    solo = [SGD.reached(m, xp, batched.run_slice(pt, r), xtt[r], be.asarray(yt[r])) for r in range(R)]
    assert list(got) == solo == [True, True, True, False, True]


def test_a_run_kept_as_a_row_of_the_epochs_snapshot_gives_its_own_curves():
    """EpochLog.keep_row keeps a reference to row j of one copy of all runs' weights (a Snapshot), evaluated for
    every row at once when first asked; past the budget at once. Either way each run gets its own row's figures."""
    from sweep.methods.epoch_log import EpochLog, Snapshot, per_row

    calls = []

    def evaluate(arrays, ids):
        calls.append(list(ids))
        return per_row(lambda r: lambda p: {"sum": float(p["w"].sum() + p["b"].sum()) + 100 * r})(arrays, ids)

    snap = Snapshot({"w": np.arange(12.0).reshape(3, 4), "b": np.array([[1.0], [2.0], [3.0]])}, [7, 8, 9], evaluate)
    kept, over, other = EpochLog(), EpochLog(budget_floats=4), EpochLog()
    kept.keep_row(snap, 1)
    assert kept.used == 5 and not calls  # nothing evaluated yet (after the clock)
    other.keep_row(snap, 2)
    over.keep_row(snap, 1)  # past its budget: the snapshot is evaluated now, once for all its rows
    assert over.used == 0 and calls == [[7, 8, 9]] and snap.arrays is None
    assert kept.curves() == over.curves() == {"sum": [4.0 + 5 + 6 + 7 + 2 + 800]}
    assert other.curves() == {"sum": [8.0 + 9 + 10 + 11 + 3 + 900]} and len(calls) == 1


@pytest.mark.skipif(not GPU, reason="needs a GPU")
def test_a_large_gpu_batch_equals_its_solo_runs():
    """300 sgd runs at once on the GPU (the host draws their orders on several threads): a sample of them equals
    the same jobs solved alone on the GPU."""
    runs = [(s, 0.1, 0.01) for s in range(300)]
    outs = batch(jobs("sgd", "sparse_parity", runs, "tracker=none", "device=cuda", "device.dtype=float64"))
    for r in (0, 1, 77, 150, 299):
        (solo,) = jobs("sgd", "sparse_parity", [runs[r]], "tracker=none", "device=cuda", "device.dtype=float64")
        assert_same(outs[r], solo.method.solve(solo.ctx).finalize())


@pytest.mark.parametrize("rng", ["host", "counter"])
def test_the_phase_profile_runs_and_accounts_for_the_whole_solve(rng):
    """benchmarks/profile_batch_phases.py is what a GPU session runs first (docs/results/batching.md, "On a GPU"):
    it must run, and its phases must add up to the solve (the rest is the solve less the timed phases, never
    negative)."""
    import re
    import subprocess
    import sys

    from tests.conftest import ROOT

    r = subprocess.run(
        [sys.executable, "benchmarks/profile_batch_phases.py", "--runs", "3,6", "--epochs", "2", "--hidden", "8"]
        + ["--rng", rng],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    for R in (3, 6):
        block = r.stdout.split(f"R={R}:")[1].split("R=")[0]
        shares = [float(s) for s in re.findall(r"(-?[\d.]+)%", block)]
        weights = "initial weights (host)" if rng == "host" else "initial weights (device draws)"
        assert "steps" in block and "orders (drawn)" in block and weights in block and len(shares) == 9
        assert sum(shares) == pytest.approx(100, abs=0.6) and min(shares) >= 0


def test_a_gpu_benchmark_on_a_machine_without_one_is_one_line():
    """docs/results/batching.md's and gpu.md's GPU commands (`--device cuda`) ended in NoDeviceHere's traceback on a
    machine with no GPU, the case of every newcomer who pastes them first: one line, exit 2."""
    import subprocess
    import sys

    import torch

    from tests.conftest import ROOT

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    cmd = [sys.executable, "benchmarks/profile_batch_phases.py", "--device", "cuda", "--runs", "2"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "profile_batch_phases.py: device.torch_device='cuda' needs a CUDA GPU and this machine has none "
        f"(torch {torch.__version__} sees no CUDA device): run it on a machine that has one"
    ], r.stderr
