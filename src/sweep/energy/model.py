"""The energy model over a trace (docs/energy.md): every float access is served by one level of the memory
hierarchy (sweep.energy.hierarchy), the smallest whose capacity holds the element's LRU stack depth; a first
touch comes from the last level. Mattson's stack algorithm gives every level's counts in one pass
(sweep.trace.stack, the pass DMD reads too). Memory energy = sum over levels of floats read x read_pj + floats
written x write_pj; compute energy = the operation counts the method reported (Trace.compute) x ops_pj.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Mapping

import numpy as np

from sweep.energy.hierarchy import Hierarchy
from sweep.trace.replay import PerResult
from sweep.trace.report import TrackerReport
from sweep.trace.stack import COLD, stack_replay
from sweep.trace.trace import READ, Trace


@dataclass
class LevelCounts:
    """Floats read and written at each level."""

    reads: np.ndarray  # per level
    writes: np.ndarray


def _levels(h: Hierarchy, rows: np.ndarray) -> np.ndarray:
    """The level serving each observed run (LRU depth within its capacity; a first touch from the outermost)."""
    depth = rows[:, 2]
    level = np.searchsorted(np.asarray(h.capacities_floats(), dtype=np.int64), depth, side="left")
    level[depth == COLD] = len(h.levels) - 1
    return level


def _segment_counts(h: Hierarchy, rows: np.ndarray, events: tuple = ()) -> np.ndarray:
    """[floats read per level..., floats written per level...] of one segment (sweep.trace.stack rows)."""
    n, level, is_write, count = len(h.levels), _levels(h, rows), rows[:, 1] != READ, rows[:, 4]
    return np.concatenate(
        (
            np.bincount(level[~is_write], weights=count[~is_write], minlength=n),
            np.bincount(level[is_write], weights=count[is_write], minlength=n),
        )
    )


def energy_pass(h: Hierarchy) -> PerResult:
    """The LRU stack pass (reads and writes both touch) with per-segment level counts on ``h``: share one
    across the traces of a run."""
    return PerResult(stack_replay(reads_move=True), partial(_segment_counts, h), 2 * len(h.levels))


def level_counts_each(traces: list[Trace], h: Hierarchy, p: PerResult | None = None) -> list[LevelCounts]:
    """Level counts of each trace, the stack carried from one to the next (as one trace cut into pieces)."""
    p = p or energy_pass(h)
    n = len(h.levels)
    return [LevelCounts(s[:n], s[n:]) for s in p.sums(p.replay.result_ids(traces, (), carry=True))]


def level_counts(trace: Trace, h: Hierarchy, p: PerResult | None = None) -> LevelCounts:
    return level_counts_each([trace], h, p)[0]


def compute_pj(compute_ops: Mapping[str, int], h: Hierarchy) -> float:
    unpriced = sorted(set(compute_ops) - set(h.ops_pj))
    if unpriced:  # validation prices every OP_KINDS entry: a method reported a kind outside the vocabulary
        raise ValueError(
            f"operation kind {unpriced[0]!r} is not in OP_KINDS (sweep.trace.trace), so hierarchy "
            f"{h.name} has no price for it"
        )
    return float(sum(n * h.ops_pj[k] for k, n in compute_ops.items()))


def energy_metrics(
    trace: Trace, h: Hierarchy, p: PerResult | None = None, lc: LevelCounts | None = None
) -> dict[str, float]:
    """``lc``: the trace's level counts, if already made (else from ``p``, the tracker's pass)."""
    lc = lc or level_counts(trace, h, p)
    levels = {}
    for i, lv in enumerate(h.levels):
        levels[f"{lv.name}_reads"] = float(lc.reads[i])
        levels[f"{lv.name}_writes"] = float(lc.writes[i])
        levels[f"{lv.name}_pj"] = float(lc.reads[i] * lv.read_pj + lc.writes[i] * lv.write_pj)
    memory = float(sum(levels[f"{lv.name}_pj"] for lv in h.levels))
    compute = compute_pj(trace.compute_ops, h)
    return {"energy_pj": memory + compute, "energy_memory_pj": memory, "energy_compute_pj": compute, **levels}


def _result_buffer_pj(h: Hierarchy, p: PerResult, r: int) -> dict[str, float]:
    """Memory pJ per buffer of one segment result (kept in p.memo)."""
    got = p.memo.get(("buffer_pj", r))
    if got is None:
        rows, events = p.replay.results[r], p.replay.templates[p.replay.result_template[r]]
        level = _levels(h, rows)
        price = np.where(
            rows[:, 1] != READ,
            np.array([lv.write_pj for lv in h.levels])[level],
            np.array([lv.read_pj for lv in h.levels])[level],
        )
        got = {}
        for pos, pj in zip(rows[:, 0].tolist(), (rows[:, 4] * price).tolist()):
            got[events[pos][1]] = got.get(events[pos][1], 0.0) + pj
        p.memo[("buffer_pj", r)] = got
    return got


def energy_report(trace: Trace, h: Hierarchy, p: PerResult | None = None) -> TrackerReport:
    """The energy figures and, per buffer (in order of first use), the memory energy of its accesses (column
    energy_pj): both from one pass, summed per distinct segment result."""
    p = p or energy_pass(h)
    rids = p.replay.run(trace, ())[1]
    n = len(h.levels)
    sums = p.sums([rids])[0]
    metrics = energy_metrics(trace, h, lc=LevelCounts(sums[:n], sums[n:]))
    tpls, seq = trace.segments()
    per = dict.fromkeys((e[1] for t in dict.fromkeys(seq) for e in tpls[t]), 0.0)
    occ = np.bincount(np.asarray(rids, dtype=np.int64), minlength=len(p.replay.results))
    for r in np.flatnonzero(occ).tolist():  # a few distinct results
        for name, pj in _result_buffer_pj(h, p, r).items():
            per[name] += int(occ[r]) * pj
    return TrackerReport(metrics, [{"buffer": b, "energy_pj": pj} for b, pj in per.items()])


def energy_each(traces: list[Trace], h: Hierarchy, p: PerResult | None = None) -> list[dict[str, float]]:
    """Per trace (all_steps: per epoch), the energy of its accesses and the floats each level served, the stack
    carried from trace to trace, so the per-epoch figures add up to the whole solve's (a run measured by one traced
    step logs its level counts from here: sweep.trackers.per_step)."""
    out = []
    for t, lc in zip(traces, level_counts_each(traces, h, p)):
        m = energy_metrics(t, h, lc=lc)
        keep = ("energy_pj", "energy_memory_pj", "energy_compute_pj")
        out.append({k: v for k, v in m.items() if k in keep or k.endswith(("_reads", "_writes"))})
    return out
