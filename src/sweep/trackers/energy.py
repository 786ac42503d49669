"""Energy: a memory-hierarchy energy model over the trace (tracker=energy; the model in docs/energy.md).

Every float access is served by one level of the hierarchy (sweep.trackers.hierarchy): the smallest level
whose capacity holds the element's LRU stack depth; a first touch comes from the last level. Mattson's stack
algorithm gives every level's counts in one pass (sweep.trackers.stack, the pass DMD reads too). Memory energy
= sum over levels of floats read x read_pj + floats written x write_pj; compute energy = the operation counts
the method reported (Trace.compute) x ops_pj. The same report carries ard, dmc and dmd of the trace, so every
proxy and the energy sit side by side in one run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from omegaconf import DictConfig, OmegaConf

from sweep.meter import meter_solve
from sweep.trackers.ard import Distances, ard_each, ard_report
from sweep.trackers.base import TrackerBase, TrackerReport
from sweep.trackers.cache import cache_report
from sweep.trackers.columns import Columns
from sweep.trackers.dmd import dmd, dmd_each
from sweep.trackers.hierarchy import Hierarchy, load_hierarchy
from sweep.trackers.replay import Replay
from sweep.trackers.stack import COLD, depth_runs
from sweep.trackers.trace import Trace


@dataclass
class LevelCounts:
    """Floats read and written at each level, and pJ per trace event."""

    reads: np.ndarray  # per level
    writes: np.ndarray
    event_pj: np.ndarray  # memory pJ of each event of the trace


def level_counts(trace: Trace, h: Hierarchy, replay: Replay | None = None) -> LevelCounts:
    n_levels = len(h.levels)
    runs = depth_runs(trace, reads_move=True, replay=replay)
    depth, count, is_write = runs.first, runs.count, runs.is_write
    level = np.searchsorted(np.asarray(h.capacities_floats(), dtype=np.int64), depth, side="left")
    level[depth == COLD] = n_levels - 1  # a first touch comes from the outermost level
    reads = np.bincount(level[~is_write], weights=count[~is_write], minlength=n_levels)
    writes = np.bincount(level[is_write], weights=count[is_write], minlength=n_levels)
    read_pj = np.array([lv.read_pj for lv in h.levels])
    write_pj = np.array([lv.write_pj for lv in h.levels])
    run_pj = count * np.where(is_write, write_pj[level], read_pj[level])
    return LevelCounts(reads, writes, np.bincount(runs.event, weights=run_pj, minlength=len(trace)))


def compute_pj(compute_ops: Mapping[str, int], h: Hierarchy) -> float:
    unpriced = sorted(set(compute_ops) - set(h.ops_pj))
    if unpriced:  # validation prices every OP_KINDS entry: a method reported a kind outside the vocabulary
        raise ValueError(f"operation kind {unpriced[0]!r} is not in OP_KINDS (sweep.trackers.trace), so hierarchy "
                         f"{h.name} has no price for it")
    return float(sum(n * h.ops_pj[k] for k, n in compute_ops.items()))


def energy_metrics(trace: Trace, h: Hierarchy) -> tuple[dict[str, float], LevelCounts]:
    lc = level_counts(trace, h)
    memory = float(lc.event_pj.sum())
    compute = compute_pj(trace.compute_ops, h)
    metrics = {"energy_pj": memory + compute, "energy_memory_pj": memory, "energy_compute_pj": compute}
    for i, lv in enumerate(h.levels):
        metrics[f"{lv.name}_reads"] = float(lc.reads[i])
        metrics[f"{lv.name}_writes"] = float(lc.writes[i])
        metrics[f"{lv.name}_pj"] = float(lc.reads[i] * lv.read_pj + lc.writes[i] * lv.write_pj)
    return metrics, lc


def energy_report(trace: Trace, h: Hierarchy, c: Columns | None = None) -> TrackerReport:
    """The energy figures and, per buffer, the memory energy of its accesses (column energy_pj). ``c``: the
    trace's Columns, if already made."""
    metrics, lc = energy_metrics(trace, h)
    c = c or Columns.of(trace)
    per = np.bincount(c.codes, weights=lc.event_pj, minlength=len(c.names))  # adds in event order, as a loop would
    return TrackerReport(metrics, [{"buffer": b, "energy_pj": pj} for b, pj in zip(c.names, per.tolist())])


def energy_each(traces: list[Trace], h: Hierarchy) -> list[dict[str, float]]:
    """Per trace (all_steps: per epoch), the energy of its accesses in one pass over them all, the stack
    carried from trace to trace, so the per-epoch figures add up to the whole solve's."""
    whole = Trace()
    for t in traces:
        whole.extend(t)  # templates shared: the stack pass is memoised over all epochs
    lc = level_counts(whole, h)
    bounds = np.cumsum([0] + [len(t) for t in traces])
    out = []
    for i, t in enumerate(traces):
        memory = float(lc.event_pj[bounds[i]:bounds[i + 1]].sum())
        compute = compute_pj(t.compute_ops, h)
        out.append({"energy_pj": memory + compute, "energy_memory_pj": memory, "energy_compute_pj": compute})
    return out


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


@dataclass
class EnergyTracker(TrackerBase):
    """tracker=energy: modelled energy on tracker.hierarchy, plus the proxies of the same trace: ard, dmc, dmd
    and the whole-buffer LRU cache's figures (cache_miss_floats, ...; capacity tracker.cache_size_floats)."""

    name: str = "energy"
    hierarchy: str = "cpu"
    levels: dict[str, Any] = field(default_factory=dict)  # overrides of the file's levels, key by key
    ops_pj: dict[str, Any] = field(default_factory=dict)  # overrides of the file's operation prices
    bytes_per_float: int | None = None  # None: the file's
    meter: str = "auto"  # auto: measure with the device's energy counter where there is one; none: never
    meter_window_s: float = 1.0  # solves are repeated until the measured window is at least this long

    def __post_init__(self) -> None:
        self.model = load_hierarchy(self.hierarchy, _plain(self.levels), _plain(self.ops_pj), self.bytes_per_float)

    def summarize(self, trace: Trace) -> TrackerReport:
        d = Distances.of([trace])  # columns and reuse distances once, for ard and the cache
        return (ard_report(trace, d).merge(cache_report(trace, self.cache_size_floats, d))
                .merge(TrackerReport({"dmd": dmd(trace)})).merge(energy_report(trace, self.model, d.c)))

    def measure(self, solve: Callable[[], Any], device: Any, clock: Callable[[], float]
                ) -> tuple[dict[str, float], dict[str, str]]:
        if self.meter == "none":
            return {}, {"energy.meter": "none", "energy.meter_reason": "tracker.meter=none"}
        return meter_solve(solve, device, clock, self.meter_window_s)

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        return [{**a, "dmd": d, **e}
                for a, d, e in zip(ard_each(traces), dmd_each(traces), energy_each(traces, self.model))]
