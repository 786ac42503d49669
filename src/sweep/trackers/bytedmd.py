"""ByteDMD: the group's current data-movement cost (docs/bytedmd.md), on the live-element LRU stack of
sweep.trace.live_stack.

An element at depth d (counted from the top, in elements) occupies the byte depths (d - 1)·b + 1 .. d·b, with b
bytes an element (``tracker.bytes_per_element``; 1 in the definition), and a read of it costs ⌈√k⌉ summed over
those byte depths k; writes and arithmetic cost nothing. A read run of consecutive depths covers consecutive byte
depths, so its cost is a difference of ``ceil_sqrt_sum`` (closed form, exact integers): the pass never expands
a read to its elements. Figures are worked out once per distinct simulated segment and summed by how often it
occurs (sweep.trace.replay.PerResult).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, partial
from typing import ClassVar

import numpy as np

from sweep.config.fields import Rule, positive_int
from sweep.trace.live_stack import LiveReplay
from sweep.trace.replay import PerResult
from sweep.trace.trace import READ, Trace
from sweep.trackers.ard import ard_each, ard_report
from sweep.trackers.base import TrackerBase, TrackerReport

MAX_BYTES_PER_ELEMENT = 32  # numpy's widest element: clongdouble (two x87 extended floats, padded, on x86-64)


def isqrt(x: np.ndarray) -> np.ndarray:
    """⌊√x⌋ of non-negative int64s, exact (the float root corrected by one either way)."""
    r = np.floor(np.sqrt(x.astype(np.float64))).astype(np.int64)
    r = np.where(r * r > x, r - 1, r)
    return np.where((r + 1) * (r + 1) <= x, r + 1, r)


def ceil_sqrt_sum(m: "np.ndarray | int") -> np.ndarray:
    """F(m) = ⌈√1⌉ + ... + ⌈√m⌉ (F(0) = 0). ⌈√k⌉ = j for the 2j - 1 values (j-1)² < k <= j², so with
    j = ⌈√m⌉, F(m) = Σ_{i<j} i(2i - 1) + j(m - (j-1)²) = j(6m - 2j² + 3j - 1) / 6."""
    m = np.asarray(m, dtype=np.int64)
    j = np.where(m > 0, isqrt(np.maximum(m - 1, 0)) + 1, 0)
    return j * (6 * m - 2 * j * j + 3 * j - 1) // 6


def read_costs(rows: np.ndarray, bytes_per_element: int) -> np.ndarray:
    """The cost of each priced run (sweep.trace.live_stack rows: position, first depth, count)."""
    first, count = rows[:, 1], rows[:, 2]
    b = bytes_per_element
    return ceil_sqrt_sum(b * (first + count - 1)) - ceil_sqrt_sum(b * (first - 1))


def _segment_cost(bytes_per_element: int, rows: np.ndarray, events: tuple = ()) -> np.ndarray:
    return np.array([float(read_costs(rows, bytes_per_element).sum())])


def bytedmd_pass(bytes_per_element: int = 1) -> PerResult:
    """The live-stack pass with per-segment costs: share one across the traces of a run."""
    return PerResult(LiveReplay(), partial(_segment_cost, bytes_per_element), 1)  # type: ignore[arg-type]


def bytedmd_each(traces: list[Trace], bytes_per_element: int = 1, p: PerResult | None = None) -> list[float]:
    """ByteDMD of each trace, the traces being consecutive pieces of one run (one stack carried through them,
    liveness seen across them), so the pieces' figures add up to the whole's."""
    p = p or bytedmd_pass(bytes_per_element)
    return p.sums(p.replay.run(traces))[:, 0].tolist()


def bytedmd(trace: Trace, bytes_per_element: int = 1, p: PerResult | None = None) -> float:
    """Σ over read elements of the ⌈√k⌉ of their byte depths."""
    return bytedmd_each([trace], bytes_per_element, p)[0]


def _buffer_costs(p: PerResult, bytes_per_element: int, r: int) -> dict[str, float]:
    """ByteDMD per buffer read in one segment result (kept in p.memo)."""
    got = p.memo.get(r)
    if got is None:
        rows, events = p.replay.results[r], p.replay.templates[p.replay.result_template[r]]
        got = {}
        for pos, cost in zip(rows[:, 0].tolist(), read_costs(rows, bytes_per_element).tolist()):
            got[events[pos][1]] = got.get(events[pos][1], 0.0) + cost
        p.memo[r] = got
    return got


def bytedmd_report(trace: Trace, bytes_per_element: int = 1, p: PerResult | None = None) -> TrackerReport:
    """``bytedmd`` and, per buffer read (in order of first use), its share (column ``bytedmd``)."""
    p = p or bytedmd_pass(bytes_per_element)
    rids = p.replay.run([trace])[0]
    total = float(p.sums([rids])[0, 0])
    tpls, seq = trace.segments()
    per = {e[1]: 0.0 for t in dict.fromkeys(seq) for e in tpls[t] if e[0] == READ}
    occ = np.bincount(np.asarray(rids, dtype=np.int64), minlength=len(p.replay.results))
    for r in np.flatnonzero(occ).tolist():  # a few distinct results
        for name, cost in _buffer_costs(p, bytes_per_element, r).items():
            per[name] += int(occ[r]) * cost
    return TrackerReport({"bytedmd": total}, [{"buffer": b, "bytedmd": c} for b, c in per.items()])


@dataclass
class ByteDMDTracker(TrackerBase):
    """tracker=bytedmd: the ARD figures plus `bytedmd`."""

    name: str = "bytedmd"
    bytes_per_element: int = 1  # the definition's: every element one byte

    field_rules: ClassVar[tuple[Rule, ...]] = (
        *TrackerBase.field_rules,
        # the costs are exact int64s of the byte depths: far past numpy's widest element a large trace's figure
        # overflowed, silently negative at 1e11 and an OverflowError at 1e30
        Rule(
            "tracker.bytes_per_element",
            f"an integer from 1 to {MAX_BYTES_PER_ELEMENT} (numpy's widest element, clongdouble)",
            lambda v, c: positive_int(v) and v <= MAX_BYTES_PER_ELEMENT,
        ),
    )

    @cached_property
    def _pass(self) -> PerResult:  # one memo for the whole trace and its epochs
        return bytedmd_pass(self.bytes_per_element)

    def summarize(self, trace: Trace) -> TrackerReport:
        return ard_report(trace).merge(bytedmd_report(trace, self.bytes_per_element, self._pass))

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        return [
            {**a, "bytedmd": d}
            for a, d in zip(ard_each(traces), bytedmd_each(traces, self.bytes_per_element, self._pass))
        ]
