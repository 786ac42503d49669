"""DMD: element-level LRU stack distance with the group's definition (docs/traces.md, "DMD").

Every float is an element (buffer, index); an event touches its buffer's elements 0..size-1 in order. A write
moves the element to the top of the stack; a read moves nothing and observes the element's 1-based depth in the
stack ordered by most recent write; a never-written element has depth stack size + 1. DMD = sum of sqrt(depth)
over read elements.

A per-element simulation (splay tree) costs O(log n) Python work per float. The depths come instead from the
run-based stack pass in sweep.trace.stack (shared with the energy model, memoised per step template): a
read's run of elements has consecutive depths, so its sqrt sum is a difference of a cumulative-sqrt table. The
sum is taken once per distinct (stack state, step template) result and weighted by how often the result occurs
(sweep.trace.replay.PerResult), so a whole-solve trace never becomes arrays over its elements or events.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

import numpy as np

from sweep.trace.replay import PerResult
from sweep.trace.stack import depth_runs, stack_replay
from sweep.trace.trace import Trace
from sweep.trackers.ard import ard_each, ard_report
from sweep.trackers.base import TrackerBase, TrackerReport


def read_runs(trace: Trace) -> Iterator[tuple[int, int, int]]:
    """For every read event, in order, its element runs as (first depth, step, count): the run's depths are
    first, first + step, ..., for count elements (step -1 for written runs, 0 for never-written elements)."""
    r = depth_runs(trace)
    return zip(r.first.tolist(), r.step.tolist(), r.count.tolist())


def element_distances(trace: Trace) -> np.ndarray:
    """Per read element, in trace order, its depth (for tests; the tracker never materialises this)."""
    parts = [first + step * np.arange(count, dtype=np.int64) for first, step, count in read_runs(trace)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


_SQRT_SUMS = [np.zeros(1)]  # the longest sqrt_sums table made so far


def sqrt_sums(top: int) -> np.ndarray:
    """csum[d] = sqrt(1) + ... + sqrt(d), d = 0..top (at least): a run of depths a..b sums to csum[b] - csum[a-1].
    np.cumsum adds in order, so a longer table has the same entries: one table, grown by doubling, serves all."""
    if len(_SQRT_SUMS[0]) <= top:
        n = max(top, 2 * len(_SQRT_SUMS[0]))
        _SQRT_SUMS[0] = np.concatenate(([0.0], np.cumsum(np.sqrt(np.arange(1, n + 1, dtype=np.float64)))))
    return _SQRT_SUMS[0]


def segment_dmd(rows: np.ndarray, events: tuple = ()) -> np.ndarray:
    """[sum of sqrt(depth)] over the observed runs of one segment (sweep.trace.stack rows), run by run."""
    first, step, count = rows[:, 2], rows[:, 3], rows[:, 4]
    flat = step == 0
    csum = sqrt_sums(int(first.max()) if len(first) else 0)
    per_run = np.where(
        flat,
        count * np.sqrt(first.astype(np.float64)),
        csum[np.where(flat, 0, first)] - csum[np.where(flat, 0, first - count)],
    )
    return np.array([float(np.cumsum(per_run)[-1]) if len(per_run) else 0.0])


def dmd_pass() -> PerResult:
    """DMD's stack pass (reads move nothing) with its per-segment sums: share one across the traces of a run."""
    return PerResult(stack_replay(reads_move=False), segment_dmd, 1)


def dmd_each(traces: list[Trace], p: PerResult | None = None) -> list[float]:
    """dmd(t) for every trace, each on its own stack (from empty); one memo for all of them."""
    p = p or dmd_pass()
    return p.sums(p.replay.result_ids(traces, (), carry=False))[:, 0].tolist()


def dmd(trace: Trace, p: PerResult | None = None) -> float:
    """Sum of sqrt(depth) over read elements."""
    return dmd_each([trace], p)[0]


@dataclass
class DMDTracker(TrackerBase):
    """tracker=dmd: the ARD figures plus `dmd`."""

    name: str = "dmd"

    @cached_property
    def _pass(self) -> PerResult:  # one memo for the whole trace and its epochs
        return dmd_pass()

    def summarize(self, trace: Trace) -> TrackerReport:
        return ard_report(trace).merge(TrackerReport({"dmd": dmd(trace, self._pass)}))

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        return [{**a, "dmd": d} for a, d in zip(ard_each(traces), dmd_each(traces, self._pass))]
