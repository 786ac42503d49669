"""Every method's trace, solved for real: every read follows a write of its buffer (no cold reads but the
documented ones), forward-forward's cost against backprop's, operation counts of the known kinds
(Trace.compute), the same on numpy and torch, and a hand-checked count of one SGD step."""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hydra.utils import get_class

from sweep import job
from sweep.config.check import check_job
from sweep.errors import ConfigError
from sweep.methods.base import Context, Outcome
from sweep.methods.sgd import SGD
from sweep.paths import CONF_DIR
from sweep.trace.source import Source
from sweep.trace.trace import OP_KINDS, READ, WRITE, Trace
from sweep.trackers.ard import ard_report
from sweep.variants.standard import Standard
from tests.conftest import compose, made_once

# the sparse-bit problems and their methods; problem=chars and its language models: tests/test_chars.py
CHARS_METHODS = ("bigram", "mlp_lm", "gpt", "char_model")  # char_model: tests/test_char_challenge.py
METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml") if p.stem not in CHARS_METHODS)
PROBLEMS = sorted(p.stem for p in (CONF_DIR / "problem").glob("*.yaml") if p.stem != "chars")
VARIANTS = sorted(p.stem for p in (CONF_DIR / "variant").glob("*.yaml"))
SGD_LIKE = ("sgd", "sign_sgd", "curriculum")  # the methods whose step is the variant's
BASE = ("problem.n_bits=8", "problem.k_sparse=2", "problem.n_train=200", "problem.n_test=50")
SMALL = {  # a few epochs of a narrow net: enough to cover every branch of the loop, cheap to trace whole
    "sgd": ("method.hidden=16", "method.max_epochs=3"),
    "sign_sgd": ("method.hidden=16", "method.max_epochs=3"),
    "curriculum": ("method.hidden=16", "method.max_epochs=3", "method.schedule=[5]"),
    "forward_forward": ("method.hidden=8", "method.max_epochs=2"),
    "km": ("method.influence_samples=40",),
}
TILE = {v: ("variant.tile_size=4",) for v in ("tiled", "tiled_fused", "tiled_w2")}


def _job(method: str, problem: str, variant: str):
    return compose(
        f"method={method}", f"problem={problem}", f"variant={variant}", *TILE.get(variant, ("variant.tile_size=0",))
    )


def applies(cfg) -> bool:
    return get_class(cfg.problem._target_).name in get_class(cfg.method._target_).problems


def valid(cfg) -> bool:
    try:
        check_job(job.job_config(cfg))
    except ConfigError:
        return False
    return True


def arms_of(method: str) -> list[tuple[str, str, str]]:
    """(method, problem, variant) for every problem the method applies to; SGD-like methods x every variant that
    applies (sgd's linear model on sparse_sum has no variants). The standard variant's job config answers both."""
    out = []
    for p in PROBLEMS:
        standard = _job(method, p, "standard")
        if applies(standard):
            variants = VARIANTS if method in SGD_LIKE else ("standard",)
            out += [(method, p, v) for v in variants if valid(standard if v == "standard" else _job(method, p, v))]
    return out


def arms() -> list[tuple[str, str, str]]:
    """Every method's arms (arms_of; ~8 CPU s of compositions in all), each method's worked out once a session, not
    once in each xdist worker's collection; the workers take the methods from opposite ends, so the two share the
    work rather than one waiting on the other's lock."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    order = METHODS if int(worker.removeprefix("gw") or 0) % 2 == 0 else METHODS[::-1]
    made = {
        m: json.loads((made_once(f"method-arms-{m}", lambda d, m=m: _write(d, arms_of(m))) / "arms.json").read_text())
        for m in order
    }
    return [tuple(a) for m in METHODS for a in made[m]]


def _write(d: Path, arms: list) -> None:
    (d / "arms.json").write_text(json.dumps(arms))


ARMS = arms()


def solve_traced(*args: Any, **kwargs: Any) -> Trace:
    """The trace of one real solve (solve_with's arguments)."""
    return solve_with(*args, **kwargs)[0]


@functools.lru_cache(maxsize=None)  # the tests below read the same solves: each is traced once
def solve_with(
    method: str,
    problem: str,
    variant: str = "standard",
    scope: str = "all_steps",
    device: str = "cpu",
    overrides: tuple[str, ...] = (),
    source: str = "hand",
) -> tuple[Trace, Outcome]:
    """One real solve traced from ``source`` (tracker.source), the whole solve with scope all_steps (overrides after
    BASE and SMALL): its trace and its (evaluated) outcome."""
    cfg = compose(
        f"method={method}",
        f"problem={problem}",
        f"variant={variant}",
        f"device={device}",
        f"tracker.scope={scope}",
        *BASE,
        *SMALL.get(method, ()),
        *TILE.get(variant, ()),
        *overrides,
    )
    prob = job.build(cfg.problem)
    ctx = Context(
        problem=prob,
        data=prob.generate(),
        backend=job.make_backend(cfg.device),
        trace=Trace(),
        scope=scope,
        variant=job.build(cfg.variant),
        source=Source(source),
    )
    return ctx.trace, job.build(cfg.method).solve(ctx).finalize()


# tiled writes dh whole and reads it tile by tile under dh_tile{t}, as in the group's measurement (seed 003)
DOCUMENTED_COLD = {"tiled": re.compile(r"dh_tile\d+")}


def cold_reads(trace: Trace) -> set[str]:
    """Buffers read before any write of them (ARD leaves those reads out: distance -1)."""
    written, cold = set(), set()
    for op, name, _ in trace.events:
        if op == WRITE:
            written.add(name)
        elif name not in written:
            cold.add(name)
    return cold


@pytest.mark.parametrize("scope", ["all_steps", "published", "init_sample0"])
@pytest.mark.parametrize("method, problem, variant", ARMS)
def test_every_read_follows_a_write(method, problem, variant, scope):
    t = solve_traced(method, problem, variant, scope)
    assert any(op == READ for op, _, _ in t.events)
    cold = cold_reads(t)
    documented = DOCUMENTED_COLD.get(variant)
    assert {b for b in cold if not (documented and documented.fullmatch(b))} == set(), (method, variant, scope)
    if documented:  # ... and the documented ones are really there
        assert cold and all(documented.fullmatch(b) for b in cold)


def test_forward_forward_reads_four_times_per_layer_and_costs_more_ard_than_backprop():
    """Seed 002: FF needs 4 weight reads per layer per step (two forwards, two local updates) against
    backprop's 2, and its ARD is worse at the same width. One traced step each, hidden 64, n = 20."""
    wide = ("problem.n_bits=20", "problem.k_sparse=3", "method.hidden=64", "method.max_epochs=1")
    sgd = solve_traced("sgd", "sparse_parity", scope="published", overrides=wide)
    assert sum(op == READ and name == "W1" for op, name, _ in sgd.events) == 2
    for layers in (1, 2):
        ff = solve_traced(
            "forward_forward", "sparse_parity", scope="published", overrides=(*wide, f"method.layers={layers}")
        )
        for li in range(layers):
            assert sum(op == READ and name == f"W{li}" for op, name, _ in ff.events) == 4
        assert ard_report(ff).metrics["ard"] > ard_report(sgd).metrics["ard"], layers


def test_compute_rejects_an_unknown_kind():
    t = Trace()
    t.compute("fma", 3)
    with pytest.raises(ValueError, match=r"unknown operation kind 'madd'.*OP_KINDS: fma, add"):
        t.compute("madd", 1)
    assert t.compute_ops == {"fma": 3}


@pytest.mark.parametrize("method, problem, variant", ARMS)
def test_every_method_counts_its_arithmetic(method, problem, variant):
    ops = solve_traced(method, problem, variant).compute_ops
    assert ops and set(ops) <= set(OP_KINDS), ops
    assert all(isinstance(c, int) and c > 0 for c in ops.values()), ops


@pytest.mark.parametrize("method", [m for m in METHODS if m != "gf2"])  # gf2 eliminates Python ints
def test_torch_counts_what_numpy_counts(method):
    pytest.importorskip("torch")
    problem = "sparse_parity"
    assert solve_traced(method, problem, device="torch_cpu").compute_ops == solve_traced(method, problem).compute_ops


def test_one_sgd_step_hand_counted():
    B, n, H, lr, wd = 2, 3, 4, 0.1, 0.01
    rng = np.random.RandomState(0)
    p = {"W1": rng.randn(H, n), "b1": np.zeros(H), "W2": rng.randn(1, H), "b2": np.zeros(1)}
    x, y = np.ones((B, n)), np.array([1.0, -1.0])  # same input, both labels: one of the margins is below 1
    t = Trace()
    import array_api_compat.numpy as xp

    assert Standard().step(xp, p, x, y, SGD(lr=lr, wd=wd).make_update(xp), t)
    assert t.compute_ops == {
        # forward: x W1^T (B n H), out = h W2 (B H); + b1 (B H), + b2 (B); relu (B H)
        "fma": B * n * H
        + B * H
        # layer 2 grad dW2 = dout h (B H); layer 1 grad dh_pre^T x (B n H)
        + B * H
        + B * n * H,
        # + b1, + b2; db2 = sum dout (B); db1 = sum dh_pre (B H); the updates p -= g (nH + H + H + 1)
        "add": B * H + B + B + B * H + (n * H + H + H + 1),
        "max": B * H,
        # margin out*y (B), dout = y * -lr/B (B); dh = dout W2 (B H), relu mask (B H); weight decay (nH + H)
        "mul": B + B + B * H + B * H + (n * H + H),
        "cmp": B + B * H,  # margin < 1, h_pre > 0
    }


def test_stopped_step_counts_only_forward_and_margin():
    import array_api_compat.numpy as xp

    B, n, H = 1, 3, 4
    p = {"W1": np.ones((H, n)), "b1": np.zeros(H), "W2": np.ones((1, H)), "b2": np.zeros(1)}
    t = Trace()
    assert not Standard().step(xp, p, np.ones((B, n)), np.ones(B), SGD().make_update(xp), t)  # out = 12
    assert t.compute_ops == {"fma": B * n * H + B * H, "add": B * H + B, "max": B * H, "mul": B, "cmp": B}
