"""Whole-solve traces as step templates (Trace.end_step) and the trackers' memoised passes over them: exactly the
figures of one plain pass over the flat event list, on random traces and on real whole-solve traces."""

from __future__ import annotations

import random

import pytest

from sweep import job
from sweep.backend import Backend
from sweep.methods.base import Context
from sweep.trace.report import TrackerReport
from sweep.trace.stack import COLD, depth_runs
from sweep.trace.trace import READ, Trace
from sweep.trackers.ard import ARDTracker, reuse_distances
from sweep.trackers.cache import CacheTracker
from sweep.trackers.dmd import DMDTracker
from sweep.trackers.energy import EnergyTracker
from tests.conftest import compose
from tests.test_dmd import brute_force
from tests.test_trackers import literal_distances

TRACKERS = [ARDTracker(), CacheTracker(), CacheTracker(cache_size_floats=300), DMDTracker(), EnergyTracker()]


def flat(trace: Trace) -> Trace:
    """The same events as one segment: the trackers' plain one-pass computation, no memo reuse."""
    one = Trace(list(trace.events))
    one.compute_ops = dict(trace.compute_ops)
    return one


# ByteDMD's operations end with their step (docs/bytedmd.md), so the same events as one segment are another trace
# to it: its memoised pass is checked against the literal definition on segmented traces (tests/test_bytedmd.py)
SEGMENTED = "bytedmd"


def assert_same(got: TrackerReport, ref: TrackerReport) -> None:
    """The same figures: counts exactly, float sums up to rounding (a templated trace adds per distinct segment,
    a flat one event by event)."""
    got, ref = (
        TrackerReport(
            {k: v for k, v in r.metrics.items() if k != SEGMENTED},
            [{k: v for k, v in row.items() if k != SEGMENTED} for row in r.table],
        )
        for r in (got, ref)
    )
    assert got.metrics == pytest.approx(ref.metrics, rel=1e-12)
    assert [list(r.items()) for r in got.table] == [
        [(k, v if isinstance(v, str) or v is None else pytest.approx(v, rel=1e-12)) for k, v in r.items()]
        for r in ref.table
    ]


def lru_brute_force(trace: Trace) -> list[int]:
    """Every element access's LRU depth (reads and writes both move the element to the top; first touch COLD)."""
    stack: list[tuple[str, int]] = []
    out = []
    for _, name, size in trace:
        for j in range(size):
            el = (name, j)
            if el in stack:
                out.append(stack.index(el) + 1)
                stack.remove(el)
            else:
                out.append(COLD)
            stack.insert(0, el)
    return out


def element_depths(trace: Trace, reads_move: bool) -> list[int]:
    r = depth_runs(trace, reads_move)
    return [f + s * k for f, s, c in zip(r.first.tolist(), r.step.tolist(), r.count.tolist()) for k in range(c)]


def random_steps(seed: int) -> Trace:
    """A few random step templates (some sharing a prefix, like a step stopped at its margin test), repeated in
    a random order after a random INIT, with a segment boundary after every step."""
    rng = random.Random(seed)
    names = "abcde"

    def events(n: int) -> list[tuple[int, str, int]]:
        return [(READ if rng.random() < 0.55 else 1, rng.choice(names), rng.choice((0, 1, 2, 3, 5))) for _ in range(n)]

    full = events(rng.randint(1, 12))
    steps = [full, full[: rng.randint(1, len(full))], events(rng.randint(1, 6))]
    t = Trace()
    for op, name, size in events(rng.randint(0, 6)):
        (t.read if op == READ else t.write)(name, size)
    for _ in range(rng.randint(1, 40)):
        for op, name, size in rng.choices(steps, weights=(6, 2, 1))[0]:
            (t.read if op == READ else t.write)(name, size)
        t.end_step()
    return t


def test_segments_are_templates_in_order():
    t = Trace.from_text("W a 2, R a 2")
    t.end_step()
    for _ in range(3):
        t.read("a", 2)
        t.end_step()
    t.write("b", 1)
    assert t.templates == [((1, "a", 2), (0, "a", 2)), ((0, "a", 2),)]
    assert len(t) == 6 and t.events[-1] == (1, "b", 1)  # open events count and close on reading
    assert t.seq == [0, 1, 1, 1, 2]
    whole = Trace()
    whole.extend(t)
    whole.extend(t)
    assert whole.events == t.events + t.events and len(whole.templates) == 3


@pytest.mark.parametrize("seed", range(30))
def test_stack_depths_match_brute_force(seed):
    t = random_steps(seed)
    assert element_depths(t, reads_move=False) == brute_force(t)
    assert element_depths(t, reads_move=True) == lru_brute_force(t)


@pytest.mark.parametrize("seed", range(30))
def test_memoised_passes_equal_one_plain_pass(seed):
    t = random_steps(seed)
    assert reuse_distances(t).tolist() == literal_distances(t)  # per template and instance, as the spec's rule
    for tracker in (ARDTracker(), CacheTracker(cache_size_floats=6), DMDTracker(), EnergyTracker()):
        assert_same(tracker.summarize(t), tracker.summarize(flat(t)))
    r, ref = depth_runs(t, reads_move=True), depth_runs(flat(t), reads_move=True)
    for field in ("event", "is_write", "first", "step", "count"):
        assert getattr(r, field).tolist() == getattr(ref, field).tolist()


def solve_traced(*overrides: str) -> tuple[Trace, list[Trace]]:
    """A real whole-solve (tracker.scope=all_steps) trace and its per-epoch traces."""
    cfg = compose(*overrides)
    trace = Trace()
    problem = job.build(cfg.problem)
    ctx = Context(
        problem=problem,
        data=problem.generate(),
        backend=Backend(),
        trace=trace,
        scope="all_steps",
        variant=job.build(cfg.variant),
    )
    outcome = job.build(cfg.method).solve(ctx)
    return trace, list(outcome.traces.values())


SMALL = ("method.hidden=16", "problem.n_train=96", "method.max_epochs=3")


@pytest.mark.parametrize(
    "overrides",
    [
        (*SMALL, "variant=standard"),
        (*SMALL, "variant=fused"),
        (*SMALL, "variant=perlayer"),
        (*SMALL, "variant=tiled", "variant.tile_size=4"),
        ("method=sign_sgd", *SMALL),
        ("method=curriculum", *SMALL),
        ("method=forward_forward", "method.hidden=16", "method.max_epochs=2", "problem.n_train=160"),
    ],
    ids=["standard", "fused", "perlayer", "tiled", "sign_sgd", "curriculum", "forward_forward"],
)
def test_real_whole_solve_traces_equal_one_plain_pass(overrides):
    trace, epochs = solve_traced(*overrides)
    assert len(trace.templates) <= 8 and len(trace.templates) < len(trace.seq)  # a few templates, repeated
    for tracker in TRACKERS:
        assert_same(tracker.summarize(trace), tracker.summarize(flat(trace)))
        if epochs:
            ref = tracker.summarize_each([flat(e) for e in epochs])
            got = tracker.summarize_each(epochs)
            drop = [{k: v for k, v in m.items() if k != SEGMENTED} for m in got]
            assert drop == [pytest.approx({k: v for k, v in m.items() if k != SEGMENTED}, rel=1e-12) for m in ref]


def test_real_trace_depths_match_brute_force():
    trace, _ = solve_traced(
        "method.hidden=4", "problem.n_bits=6", "problem.n_train=40", "method.max_epochs=2", "method.batch_size=8"
    )
    assert element_depths(trace, reads_move=False) == brute_force(trace)
    assert element_depths(trace, reads_move=True) == lru_brute_force(trace)
