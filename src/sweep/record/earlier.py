"""The seconds an experiment's earlier job runs took, for a sweep's estimate before its first job ends (the
launcher's ETA, `LaunchHooks.estimate`).

A run's seconds are what it was billed for (`BILLED_SECONDS`: Modal's container seconds, a CPU host's CPU
seconds), else its start to its end (a batch's runs: each the whole batch's). An SQLite store is read here in one
query, without MLflow. Any other store is not asked at all: a tracking server is given no request for an estimate,
so only the runs resume has read already count (`Recorder.finished_hashes`: every FINISHED run of the experiment
for a grid of more than RESUME_QUERY_MAX jobs, the done ones for fewer, none under force=true).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, NamedTuple, Optional

from sweep.metrics import BILLED_SECONDS
from sweep.record.tags import HASH_TAG


class Took(NamedTuple):
    config_hash: str
    run_name: str
    start_ms: int
    seconds: float


def of_run(run: Any) -> Optional[Took]:
    """A FINISHED job run read through MLflow's client (or the SQLite client's look-alike); None for another
    (a parent, a bookkeeping run, one with no end)."""
    h, info, metrics = run.data.tags.get(HASH_TAG), run.info, run.data.metrics
    if not h or info.status != "FINISHED" or not info.start_time or not info.end_time:
        return None
    billed = next((metrics[k] for k in BILLED_SECONDS if metrics.get(k)), None)
    return Took(h, info.run_name or "", info.start_time, billed or (info.end_time - info.start_time) / 1000)


def from_sqlite(path: Path, experiment_id: str) -> Optional[list[Took]]:
    """Every FINISHED job run of the experiment, oldest first; None where SQLite cannot read the store."""
    billed = " ".join(
        f"LEFT JOIN latest_metrics m{i} ON m{i}.run_uuid = r.run_uuid AND m{i}.key = '{k}'"
        for i, k in enumerate(BILLED_SECONDS)
    )
    first = "COALESCE(" + ", ".join(f"NULLIF(m{i}.value, 0)" for i in range(len(BILLED_SECONDS))) + ")"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            rows = conn.execute(
                f"SELECT t.value, r.name, r.start_time, r.end_time, {first} FROM runs r "  # noqa: S608 - names of ours
                f"JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = ? {billed} "
                "WHERE r.experiment_id = ? AND r.status = 'FINISHED' AND r.lifecycle_stage = 'active' "
                "AND r.start_time > 0 AND r.end_time > 0 ORDER BY r.start_time",
                (HASH_TAG, int(experiment_id)),
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return [Took(h, name or "", start, billed or (end - start) / 1000) for h, name, start, end, billed in rows]
