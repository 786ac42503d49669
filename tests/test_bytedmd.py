"""ByteDMD (docs/bytedmd.md) against hand-worked cases and a literal element-by-element simulation."""

from __future__ import annotations

import math
import random

import pytest

from sweep.trace.live_stack import LiveReplay
from sweep.trace.trace import READ, Trace
from sweep.trackers.bytedmd import ByteDMDTracker, bytedmd, bytedmd_each, ceil_sqrt_sum
from tests.conftest import random_trace


def literal(segments: list[list[tuple[int, str, int]]]) -> list[list[int]]:
    """The definition, one element at a time (after the group's reference tracer): per read event, in trace order,
    the depths of its elements, sorted. The stack is a list of value ids, top first."""
    ops = []  # (reads, writes): lists of (event number, element)
    k = 0
    for seg in segments:
        reads: list = []
        writes: list = []
        for op, name, size in seg:
            if size > 0 and op == READ and writes:  # a read after a write starts an operation
                ops.append((reads, writes))
                reads, writes = [], []
            if size > 0:
                (reads if op == READ else writes).append((k, [(name, j) for j in range(size)]))
            k += 1
        if reads or writes:  # a step ends its operation
            ops.append((reads, writes))
    # values: each write makes one per element; an element read before any write is an input value
    current: dict = {}
    inputs: list[list[int]] = []  # per read event that finds elements never touched: their values
    op_reads, op_writes, last_read, final = [], [], {}, set()
    n_values = 0
    for i, (reads, writes) in enumerate(ops):
        rs = []
        for ev, els in reads:
            new = []
            for el in els:
                if el not in current:
                    current[el] = n_values
                    new.append(n_values)
                    n_values += 1
                rs.append((ev, current[el]))
                last_read[current[el]] = i
            inputs.append(new)
        ws = []
        for _, els in writes:
            for el in els:
                current[el] = n_values
                ws.append(n_values)
                n_values += 1
        op_reads.append(rs)
        op_writes.append(ws)
    read_buffers = {name for seg in segments for op, name, size in seg if op == READ and size > 0}
    # the last value of each element: a result if never read after, where the trace reads its buffer somewhere
    final = {v for (name, _), v in current.items() if name in read_buffers}
    # the first read on top; within one read, the higher indices on top (as if stored in index order)
    stack = [v for new in inputs for v in reversed(new)]
    depths: dict[int, list[int]] = {}
    for i in range(len(ops)):
        for ev, v in op_reads[i]:
            depths.setdefault(ev, []).append(stack.index(v) + 1)
        for v in dict.fromkeys(v for _, v in op_reads[i]):  # moved to the top in order of first read
            stack.remove(v)
            stack.insert(0, v)
        for v in op_writes[i]:
            stack.insert(0, v)

        def alive(v):
            return last_read[v] > i if v in last_read else v in final

        stack = [v for v in stack if alive(v)]
    return [sorted(depths[ev]) for ev in sorted(depths)]


def fast(trace: Trace) -> list[list[int]]:
    """The live-stack pass's depths per read event, in trace order (each event's elements as a sorted list)."""
    rp = LiveReplay()
    rids = rp.run([trace])[0]
    out = []
    for r in rids:
        per: dict[int, list[int]] = {}
        for pos, first, count in rp.results[r].tolist():
            per.setdefault(pos, []).extend(range(first, first + count))
        out += [sorted(per[p]) for p in sorted(per)]
    return out


def segments(trace: Trace) -> list[list]:
    tpls, seq = trace.segments()
    return [list(tpls[t]) for t in seq]


def cost(depths: list[list[int]], b: int = 1) -> int:
    return sum(math.isqrt(k - 1) + 1 for ds in depths for d in ds for k in range((d - 1) * b + 1, d * b + 1))


@pytest.mark.parametrize(
    "text",
    [
        # the definition's example, (a + b) + c: a, b, c loaded with a on top (written last) ...
        "W c 1, W b 1, W a 1, R a 1, R b 1, W t 1, R t 1, R c 1, W s 1",
        # ... or as the trace's inputs (read before any write): on the stack from the start, the first read on top
        "R a 1, R b 1, W t 1, R t 1, R c 1, W s 1",
    ],
)
def test_the_definitions_example(text):
    t = Trace.from_text(text)
    assert fast(t) == [[1], [2], [1], [2]] == literal(segments(t))
    assert bytedmd(t) == 6  # ⌈√1⌉ + ⌈√2⌉ + ⌈√1⌉ + ⌈√2⌉


def test_matvec_of_the_definitions_readme():
    # y = A x for 2 x 2 A, scalar by scalar: x0, x1, A00 .. A11 stored in that order (A11 on top); its reads
    # are at depths 4, 6 | 5, 6 | 3, 1 | 5, 3 | 4, 3 | 2, 1, total 26, with y0 and y1 kept as results. A trace
    # marks no results: the caller reading them at the end (y1 at 1, y0 at 2) keeps them, and costs 1 + 2 more
    text = (
        "W x0 1, W x1 1, W A00 1, W A01 1, W A10 1, W A11 1, R A00 1, R x0 1, W p0 1, R A01 1, R x1 1, W p1 1,"
        "R p0 1, R p1 1, W y0 1, R A10 1, R x0 1, W p2 1, R A11 1, R x1 1, W p3 1, R p2 1, R p3 1, W y1 1,"
        "R y0 1, R y1 1"
    )
    t = Trace.from_text(text)
    assert [d for (d,) in fast(t)] == [4, 6, 5, 6, 3, 1, 5, 3, 4, 3, 2, 1, 2, 1]
    assert bytedmd(t) == 26 + 3


def test_hand_worked_buffers():
    # W a 2 puts a1 over a0; W b 1 puts b0 on top: [b0, a1, a0]. R a 2, R b 1 is one operation, priced on that
    # stack: a0 at 3, a1 at 2, b0 at 1; then a moves up (a1 on top), then b: [b0, a1, a0]. a1 is never touched
    # again, so it leaves; W c 2 goes on top: [c1, c0, b0, a0]. R a 1, R b 1, R c 2 is one operation (no write
    # between): a0 at 4, b0 at 3, c0 at 2, c1 at 1
    t = Trace.from_text("W a 2, W b 1, R a 2, R b 1, W c 2, R a 1, R b 1, R c 2")
    assert fast(t) == [[2, 3], [1], [4], [3], [1, 2]] == literal(segments(t))
    assert bytedmd(t) == 2 + 2 + 1 + 2 + 2 + 1 + 2  # ⌈√2⌉ + ⌈√3⌉ + ⌈√1⌉ + ⌈√4⌉ + ⌈√3⌉ + ⌈√1⌉ + ⌈√2⌉


def test_results_stay_and_unused_values_leave():
    # w is written last and never touched again, but the trace reads w: a result (state), it stays above b; u is
    # only ever written: never used, it leaves at once
    t = Trace.from_text("W b 1, W w 1, R w 1, W u 3, W w 2, R b 1")
    assert fast(t) == [[1], [3]] == literal(segments(t))  # R b: under w1, w0 (u gone)
    assert bytedmd(t) == 1 + 2


def test_liveness_drops_dead_values():
    # x is overwritten before it is read again, so after R x it is dead and does not sit above y: y stays at 2,
    # not 12 (10 elements of x, then the sum s)
    t = Trace.from_text("W y 1, W x 10, R x 10, W s 1, W x 10, R s 1, R y 1")
    # [x9..x0, y]: R x 10 at 1..10; x dies (written next); s pushed: [s, y]; W x 10 is never read: a result,
    # so it stays: [x9..x0, s, y]: s at 11, y at 12 (one operation: both priced before moving)
    assert fast(t) == [list(range(1, 11)), [11], [12]] == literal(segments(t))


@pytest.mark.parametrize("b", [1, 2, 3, 8])
def test_bytes_per_element(b):
    # an element at depth d covers the byte depths (d-1)b+1 .. db
    t = Trace.from_text("W a 3, W b 5, R a 3, R b 2, W a 3, R b 5, R a 1")
    assert bytedmd(t, b) == cost(literal(segments(t)), b)
    assert int(ceil_sqrt_sum(0)) == 0
    for m in (1, 2, 3, 4, 5, 99, 100, 101, 10**6, 10**6 + 1, 2**40 + 7):
        k = min(m, 2000)  # the closed form against the sum from the top down for big m
        tail = sum(math.isqrt(j - 1) + 1 for j in range(m - k + 1, m + 1))
        assert int(ceil_sqrt_sum(m)) - int(ceil_sqrt_sum(m - k)) == tail


@pytest.mark.parametrize("seed", range(60))
def test_matches_the_literal_definition(seed):
    rng = random.Random(seed)
    t = random_trace(rng, rng.randint(1, 40), sizes=(0, 1, 2, 3, 5, 8) if seed % 2 else (4, 4, 4, 7), p_read=0.55)
    if seed % 3 == 0:  # steps: operations end with their segment, and segments repeat (the memo's work)
        steps = [random_trace(rng, rng.randint(1, 12), sizes=(1, 2, 3, 5)) for _ in range(3)]
        t = Trace()
        for _ in range(6):
            for s in rng.sample(steps, 2):
                t.extend(s)
    expected = literal(segments(t))
    assert fast(t) == expected
    assert bytedmd(t) == cost(expected)
    assert bytedmd(t, 4) == cost(expected, 4)


def test_pieces_add_up_to_the_whole():
    # tracker.scope=all_steps's epochs: one stack carried through them, liveness across them
    from sweep.variants.standard import Standard
    from tests.test_variants import traced_step

    one = traced_step(Standard(), n=4, hidden=6)
    pieces = [Trace(), Trace(), Trace()]
    for i, p in enumerate(pieces):
        for _ in range(i + 2):
            p.extend(one)
    whole = Trace()
    for p in pieces:
        whole.extend(p)
    each = bytedmd_each(pieces)
    assert sum(each) == bytedmd(whole) == cost(literal(segments(whole)))
    tracker = ByteDMDTracker()
    report = tracker.summarize(whole)
    assert report.metrics["bytedmd"] == bytedmd(whole) and "ard" in report.metrics
    assert sum(row["bytedmd"] for row in report.table) == report.metrics["bytedmd"]
    assert [m["bytedmd"] for m in tracker.summarize_each(pieces)] == each


@pytest.mark.parametrize(
    "overrides",
    [
        ("method.hidden=4", "problem.n_bits=6", "problem.n_train=40", "method.max_epochs=2", "method.batch_size=8"),
        ("method=gf2", "problem.n_bits=12"),
        ("method=km", "problem.n_bits=12"),
    ],
    ids=["sgd_all_steps", "gf2", "km"],
)
def test_real_traces_match_the_literal_definition(overrides):
    from sweep import job
    from tests.conftest import compose

    scope = "all_steps" if "method.hidden=4" in overrides else "published"
    cfg = compose("tracker=bytedmd", f"tracker.scope={scope}", *overrides)
    config, j = job.prepare(cfg)
    solved = job.solve(j, cfg.device)
    trace, pieces = j.ctx.trace, list(solved.outcome.traces.values())
    expected = literal(segments(trace))
    assert fast(trace) == expected
    report, curves = j.tracker.figures(trace, pieces)
    assert report.metrics["bytedmd"] == cost(expected) > 0
    if pieces:  # the epochs of one stack: their figures add up to the whole's
        assert len(curves["bytedmd_per_epoch"]) == 2 and sum(curves["bytedmd_per_epoch"]) == cost(expected)
