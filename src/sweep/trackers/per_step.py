"""A run measured by one traced step (the character models, whose steps all have the same events): the tracker's
figures of that step, and the run's as the step's times its steps.

The step is traced after another one (Outcome.step_traces = [before, step]) and its figures are the second
trace's of `summarize_each` (the state carried from the first: parameters, optimizer state and batch were
written, as before every step of a run but its first). Counts and sums (reads, writes, total_floats, dmc, dmd,
energy in pJ, cache hits and misses, ...) are logged per step as `<name>_per_step`, and times the run's steps
under their own names; averages and rates (ard, effective_ard, cache_hit_rate) are the step's under both.
The LRU cache's figures start from an empty cache (its summarize_each does), so they are a cold step's.
"""

from __future__ import annotations

from typing import Any

from sweep.trace.trace import Trace
from sweep.trackers.base import TrackerReport

RATIOS = frozenset({"ard", "effective_ard", "cache_hit_rate"})  # the same for a run as for each of its steps
SUFFIX = "_per_step"


def per_step_report(tracker: Any, traces: list[Trace], steps: int) -> TrackerReport:
    """The measured step's figures (the last trace, after the ones before it) per step and times `steps`."""
    step = tracker.summarize_each(traces)[-1]
    metrics = {f"{k}{SUFFIX}": float(v) for k, v in step.items()}
    metrics.update({k: float(v) if k in RATIOS else float(v) * steps for k, v in step.items()})
    return TrackerReport(metrics)
