"""What an analysis of a trace reports: scalar figures and a per-buffer table. The trackers return it, and the
energy model (below them) builds its per-buffer energy as one, so it is written here, beside the trace it reads."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TrackerReport:
    """Scalar figures (logged as MLflow metrics) and a per-buffer table (logged as an artifact)."""

    metrics: dict[str, float] = field(default_factory=dict)
    table: list[dict] = field(default_factory=list)

    def merge(self, other: "TrackerReport") -> "TrackerReport":
        by_name = {row["buffer"]: dict(row) for row in self.table}
        for row in other.table:
            by_name.setdefault(row["buffer"], {}).update(row)
        return TrackerReport({**self.metrics, **other.metrics}, list(by_name.values()))
