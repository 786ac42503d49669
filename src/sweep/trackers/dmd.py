"""DMD: element-level LRU stack distance with the group's definition (docs/traces.md, "DMD").

Every float is an element (buffer, index); an event touches its buffer's elements 0..size-1 in order. A write
moves the element to the top of the stack; a read moves nothing and observes the element's 1-based depth in the
stack ordered by most recent write; a never-written element has depth stack size + 1. DMD = sum of sqrt(depth)
over read elements.

A per-element simulation (splay tree) costs O(log n) Python work per float. The depths come instead from the
run-based stack pass in sweep.trackers.stack (shared with the energy model, memoised per step template): a
read's run of elements has consecutive depths, so its sqrt sum is a difference of a cumulative-sqrt table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from sweep.trackers.ard import ard_each, ard_report
from sweep.trackers.base import TrackerBase, TrackerReport
from sweep.trackers.stack import DepthRuns, depth_runs, stack_replay
from sweep.trackers.trace import Trace


def read_runs(trace: Trace) -> Iterator[tuple[int, int, int]]:
    """For every read event, in order, its element runs as (first depth, step, count): the run's depths are
    first, first + step, ..., for count elements (step -1 for written runs, 0 for never-written elements)."""
    r = depth_runs(trace)
    return zip(r.first.tolist(), r.step.tolist(), r.count.tolist())


def element_distances(trace: Trace) -> np.ndarray:
    """Per read element, in trace order, its depth (for tests; the tracker never materialises this)."""
    parts = [first + step * np.arange(count, dtype=np.int64) for first, step, count in read_runs(trace)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def sqrt_sums(top: int) -> np.ndarray:
    """csum[d] = sqrt(1) + ... + sqrt(d), d = 0..top: a run of depths a..b sums to csum[b] - csum[a-1]. np.cumsum
    adds in order, so a longer table has the same entries: one table serves many traces."""
    return np.concatenate(([0.0], np.cumsum(np.sqrt(np.arange(1, top + 1, dtype=np.float64)))))


def _top(runs: DepthRuns) -> int:
    """The deepest first depth of a run of consecutive depths (what the sqrt_sums table must reach)."""
    consecutive = runs.first[runs.step != 0]
    return int(consecutive.max()) if len(consecutive) else 0


def dmd_of(runs: DepthRuns, csum: np.ndarray | None = None) -> float:
    """Sum of sqrt(depth) over the runs' elements, added run by run in trace order (np.cumsum is sequential, so
    the float result is the same as a Python loop's, whatever the trace's segmentation). ``csum``: a
    sqrt_sums table reaching at least _top(runs)."""
    if not len(runs.first):
        return 0.0
    first, step, count = runs.first, runs.step, runs.count
    csum = sqrt_sums(_top(runs)) if csum is None else csum
    flat = step == 0
    per_run = np.where(flat, count * np.sqrt(first.astype(np.float64)),
                       csum[np.where(flat, 0, first)] - csum[np.where(flat, 0, first - count)])
    return float(np.cumsum(per_run)[-1])


def dmd(trace: Trace) -> float:
    """Sum of sqrt(depth) over read elements."""
    return dmd_of(depth_runs(trace, reads_move=False))


def dmd_each(traces: list[Trace]) -> list[float]:
    """dmd(t) for every trace, each on its own stack: one memo and one sqrt table for all of them."""
    replay = stack_replay()
    runs = [depth_runs(t, reads_move=False, replay=replay) for t in traces]
    csum = sqrt_sums(max((_top(r) for r in runs), default=0))
    return [dmd_of(r, csum) for r in runs]


@dataclass
class DMDTracker(TrackerBase):
    """tracker=dmd: the ARD figures plus `dmd`."""

    name: str = "dmd"

    def summarize(self, trace: Trace) -> TrackerReport:
        return ard_report(trace).merge(TrackerReport({"dmd": dmd(trace)}))

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        return [{**a, "dmd": d} for a, d in zip(ard_each(traces), dmd_each(traces))]
