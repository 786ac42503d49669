"""DMD: element-level LRU stack distance with the group's definition (specs/traces.md "Element-level DMD").

Every float is an element (buffer, index); an event touches its buffer's elements 0..size-1 in order. A write
moves the element to the top of the stack; a read moves nothing and observes the element's 1-based depth in the
stack ordered by most recent write; a never-written element has depth stack size + 1. DMD = sum of sqrt(depth)
over read elements.

A per-element simulation (splay tree) costs O(log n) Python work per float. This one works per *run* of
elements instead, offline over the whole trace, because events touch whole buffers:

- A write event gives its elements consecutive write stamps, and a later write of the same buffer overwrites a
  prefix 0..s'-1 of it. So each write event's still-live elements are a suffix of its index range, and a
  buffer's current elements form a staircase of runs: the newest write covers 0..s0-1, an older, longer one
  s0..s1-1, and so on (normally a single run).
- For a run (write event e, indices lo..hi-1) the element at index j has depth
  1 + (live elements of events after e) + (hi - 1 - j): the depths are consecutive integers, so a read costs one
  Fenwick query per run and its sqrt sum is a difference of a precomputed cumulative-sqrt table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from sweep.trackers.ard import ard_each, ard_report
from sweep.trackers.base import TrackerBase, TrackerReport
from sweep.trackers.trace import READ, Trace


class _Fenwick:
    """Prefix sums over write-event ids (live element count per write event)."""

    __slots__ = ("n", "tree", "total")

    def __init__(self, n: int) -> None:
        self.n = n
        self.tree = [0] * (n + 1)
        self.total = 0

    def add(self, i: int, delta: int) -> None:
        self.total += delta
        i += 1
        tree, n = self.tree, self.n
        while i <= n:
            tree[i] += delta
            i += i & -i

    def after(self, i: int) -> int:
        """Sum over ids > i."""
        s = 0
        i += 1
        tree = self.tree
        while i > 0:
            s += tree[i]
            i -= i & -i
        return self.total - s


def read_runs(trace: Trace) -> Iterator[tuple[int, int, int]]:
    """For every read event, in order, its element runs as (first depth, step, count): the run's depths are
    first, first + step, ..., for count elements (step -1 for written runs, 0 for never-written elements)."""
    n_writes = sum(1 for op in trace.ops if op != READ)
    fw = _Fenwick(n_writes)
    stairs: dict[str, list[list[int]]] = {}  # buffer -> [[event id, lo, hi], ...], newest (lowest index) first
    stack = 0  # distinct elements ever written
    ev = 0
    for op, name, size in trace:
        runs = stairs.get(name)
        if op == READ:
            covered = 0
            if runs:
                for e, lo, hi in runs:
                    if lo >= size:
                        break
                    n = min(hi, size) - lo
                    yield fw.after(e) + hi - lo, -1, n
                    covered = hi
            if size > covered:
                yield stack + 1, 0, size - covered
            continue
        if size <= 0:
            ev += 1
            continue
        kept: list[list[int]] = [[ev, 0, size]]
        top = 0
        if runs:
            for run in runs:
                e, lo, hi = run
                top = hi
                if lo >= size:
                    kept.append(run)
                    continue
                cut = min(hi, size)
                fw.add(e, lo - cut)  # elements lo..cut-1 move to the new write
                if cut < hi:
                    kept.append([e, cut, hi])
        stack += max(0, size - top)
        fw.add(ev, size)
        stairs[name] = kept
        ev += 1


def element_distances(trace: Trace) -> np.ndarray:
    """Per read element, in trace order, its depth (for tests; the tracker never materialises this)."""
    parts = [first + step * np.arange(count, dtype=np.int64) for first, step, count in read_runs(trace)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def dmd(trace: Trace) -> float:
    """Sum of sqrt(depth) over read elements."""
    runs = list(read_runs(trace))
    if not runs:
        return 0.0
    top = max(first for first, _, _ in runs)
    # csum[d] = sqrt(1) + ... + sqrt(d): a run of depths a..b sums to csum[b] - csum[a-1]
    csum = np.concatenate(([0.0], np.cumsum(np.sqrt(np.arange(1, top + 1, dtype=np.float64)))))
    total = 0.0
    for first, step, count in runs:
        if step == 0:
            total += count * float(np.sqrt(first))
        else:
            total += float(csum[first] - csum[first - count])
    return total


@dataclass
class DMDTracker(TrackerBase):
    """tracker=dmd: the ARD figures plus `dmd`."""

    name: str = "dmd"

    def summarize(self, trace: Trace) -> TrackerReport:
        return ard_report(trace).merge(TrackerReport({"dmd": dmd(trace)}))

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        return [{**a, **{"dmd": dmd(t)}} for a, t in zip(ard_each(traces), traces)]
