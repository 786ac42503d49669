"""The result record a job returns: plain data, picklable, the only thing that travels back to the
process that writes MLflow."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Iterable

from sweep.metrics import line


@dataclass
class RunResult:
    config: dict[str, Any]  # the resolved job config (no hydra section)
    metrics: dict[str, float] = field(default_factory=dict)
    curves: dict[str, list[float]] = field(default_factory=dict)  # metric -> value per step (epoch)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)  # file name -> text content
    status: str = "FINISHED"  # FINISHED | FAILED | KILLED
    error: str | None = None  # traceback text of a failed job
    run_id: str | None = None  # filled in by the recorder
    start_time: float | None = None  # when the job started (time.time()): the run's start
    # when its own work ended where it ran, if before its recording: a run solved alone in a batch task (its end
    # was the task's, after the runs solved after it: tiled_w1's estimate was 8 minutes for a sweep of 3); None:
    # its recording is its end
    end_time: float | None = None

    def recorded(self) -> None:
        """Once written to the store, what a sweep keeps of a run for its whole length (the sweeper's return,
        the parent's totals): metrics, status, error, ids, the tracker's name (its line). The config, tags, curves
        and artifacts are in the store; kept, they cost ~15 KB a finished job. The metrics' names are interned: a
        result unpickled from a worker brings its own copy of each name, ~1 KB of a kept run's ~2.5 KB (10,000 sgd
        seeds: ~10 MB)."""
        self.config, self.curves, self.artifacts = {}, {}, {}
        self.tags = {k: self.tags[k] for k in ("tracker",) if k in self.tags}  # its line shows that tracker's figure
        self.metrics = {sys.intern(k) if type(k) is str else k: v for k, v in self.metrics.items()}

    def short_name(self) -> str:
        """A single run's name: its group choices and seed (`sgd-standard-cpu-seed42`). In a sweep a job is
        named by what it varies instead (the launcher's naming)."""
        repeat = (self.config.get("extra") or {}).get("repeat")  # a repeat of one config (extra.repeat)
        return (
            "-".join(self.tags.get(k, "?") for k in ("method", "variant", "device"))
            + f"-seed{self.config.get('problem', {}).get('seed')}"
            + (f"-repeat{repeat}" if repeat is not None else "")
        )

    def summary(self, name: str | None = None) -> str:
        """One line: status, the job's name (default: short_name()), its headline metrics."""
        m = self.metrics
        parts = [f"[{self.status}]", name or self.short_name()]
        parts += line(m, self.tags.get("tracker"))
        if self.error and self.status != "FINISHED":
            parts.append("error=" + self.error.strip().splitlines()[-1])
        if self.run_id:
            parts.append(f"run_id={self.run_id}")
        return " ".join(parts)


def sweep_totals(results: Iterable[RunResult]) -> dict[str, float]:
    """A sweep's totals over its child runs (its parent run's figures): costs and wall-clock summed, jobs finished
    and failed."""
    results = list(results)
    return {
        "cost_usd": sum(r.metrics.get("cost_usd", 0.0) for r in results),
        "task_cost_usd": sum(r.metrics.get("task_cost_usd", 0.0) for r in results),
        "wall_clock_s": sum(r.metrics.get("wall_clock_s", 0.0) for r in results),
        "jobs_finished": float(sum(r.status == "FINISHED" for r in results)),
        "jobs_failed": float(sum(r.status == "FAILED" for r in results)),
    }
