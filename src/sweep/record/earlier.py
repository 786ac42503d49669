"""The seconds an experiment's earlier job runs took, for a sweep's estimate before its first job ends (the
launcher's ETA, `JobPlan.expected_s`).

A run's seconds are its start to its end (the job's start where it ran to its recording, or to its own end for a
run solved alone in a batch's task: `RunResult.end_time`), over its batch's size (BATCH_SIZE_TAG: a batch's runs
each span the whole batch), as the launcher counts a job's own seconds. Not its
billed `cpu_s`: that is the worker's CPU alone, and a sandboxed entrant computes in a child of it (the
char_challenge preset's runs: 2.5-4.5 s of CPU for 6-34 s each; an estimate of 20 s for a sweep of 2m40s).

An SQLite store is read here in one query, without MLflow. Any other store is not asked at all: a tracking server
is given no request for an estimate, so only the runs resume has read already count (`Recorder.finished_hashes`:
every FINISHED run of the experiment for a grid of more than RESUME_QUERY_MAX jobs, the done ones for fewer, none
under force=true).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, NamedTuple, Optional

from sweep.record.tags import BATCH_SIZE_TAG, HASH_TAG, METHOD_PARAM

# the runs whose seconds say what a job takes: FAILED ones too, a job that runs into its time limit most of all (the
# parity challenge's out_of_time entrant: 60 s a seed, where the finished entrants' median was 1 s)
ENDED = ("FINISHED", "FAILED")


class Took(NamedTuple):
    config_hash: str
    run_name: str
    start_ms: int
    seconds: float
    method: str = ""  # its method.name: a job like no earlier run is expected to take its method's runs' median


def _took(h: str, name: Optional[str], start: int, end: int, batch: Optional[str], method: str = "") -> Took:
    n = int(batch) if batch and batch.isdigit() and int(batch) > 0 else 1
    return Took(h, name or "", start, (end - start) / 1000 / n, method or "")


def of_run(run: Any) -> Optional[Took]:
    """A job run that ended (ENDED) read through MLflow's client; None for another (a parent, a bookkeeping run,
    one with no end)."""
    h, info, tags = run.data.tags.get(HASH_TAG), run.info, run.data.tags
    if not h or info.status not in ENDED or not info.start_time or not info.end_time:
        return None
    method = run.data.params.get(METHOD_PARAM)
    return _took(h, info.run_name, info.start_time, info.end_time, tags.get(BATCH_SIZE_TAG), method)


def from_sqlite(path: Path, experiment_id: str) -> Optional[list[Took]]:
    """Every job run of the experiment that ended (ENDED), oldest first; None where SQLite cannot read the store."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            rows = conn.execute(
                "SELECT t.value, r.name, r.start_time, r.end_time, b.value, m.value FROM runs r "
                "JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = ? "
                "LEFT JOIN tags b ON b.run_uuid = r.run_uuid AND b.key = ? "
                "LEFT JOIN params m ON m.run_uuid = r.run_uuid AND m.key = ? "
                "WHERE r.experiment_id = ? AND r.status IN ('FINISHED', 'FAILED') AND r.lifecycle_stage = 'active' "
                "AND r.start_time > 0 AND r.end_time >= r.start_time ORDER BY r.start_time",
                (HASH_TAG, BATCH_SIZE_TAG, METHOD_PARAM, int(experiment_id)),
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return [_took(*row) for row in rows]
