"""A run measured by one traced step (the character models, whose steps all have the same events): the tracker's
figures of that step, and the run's as the step's times its steps.

The step is traced after another one (Outcome.step_traces = {"before": ..., "step": ...}), and its figures are
the second trace's of the tracker's `summarize_each` (TrackerBase.figures with `steps`): the state carried from the
first, which wrote parameters, optimizer state and batch, as before every step of a run but its first. Counts and
sums (reads, writes, total_floats, dmc, dmd, bytedmd, energy in pJ, cache hits and misses, ...) are logged per step
as `<name>_per_step`, and times the run's steps under their own names; averages and rates (ard, effective_ard,
cache_hit_rate) are the step's under both. The LRU cache's figures start from an empty cache (its summarize_each
does), so they are a cold step's. A stored trace keeps the steps (sweep.trace.stored), so sweep-rescore scores such
a run the same way.
"""

from __future__ import annotations

RATIOS = frozenset({"ard", "effective_ard", "cache_hit_rate"})  # the same for a run as for each of its steps
SUFFIX = "_per_step"


def per_step_metrics(step: dict[str, float], steps: int) -> dict[str, float]:
    """One step's figures as a run logs them: per step (``<name>_per_step``) and the run's (times ``steps``)."""
    metrics = {f"{k}{SUFFIX}": float(v) for k, v in step.items()}
    metrics.update({k: float(v) if k in RATIOS else float(v) * steps for k, v in step.items()})
    return metrics
