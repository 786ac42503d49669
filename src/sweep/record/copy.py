"""The writes of copying runs from one store into another (`sweep.store.migrate` plans which, and counts them).

Each copy carries `MIGRATED_TAG` ("<source run id> <source store>") from its creation; its status and end time
are written last, so a copy still RUNNING is unfinished (a migrate cut short) and is deleted and copied again."""

from __future__ import annotations

import tempfile
from typing import Any, Iterator, Optional

from sweep.record.tags import MIGRATED_TAG, PARENT_RUN_TAG

USER_TAG = "mlflow.user"  # MLflow's own
# MLflow's limits on one log_batch call
PARAMS_PER_BATCH, METRICS_PER_BATCH = 100, 1000


def copy_run(source: Any, target: Any, run: Any, experiment_id: str, parent_id: Optional[str], identity: str) -> Any:
    """One run of `source` (a client) into `target`'s experiment: created with the migration tag, filled, its status
    and end time written last; on any failure or Ctrl-C the partial copy is deleted. Returns the copy."""
    from mlflow.entities import Metric, Param, RunTag  # noqa: PLC0415 - MLflow: seconds to import

    info, data = run.info, run.data
    tags = {k: v for k, v in data.tags.items() if k != PARENT_RUN_TAG}
    if parent_id is not None:
        tags[PARENT_RUN_TAG] = parent_id
    creation = {MIGRATED_TAG: f"{info.run_id} {identity}"}
    if USER_TAG in tags:  # create_run takes the run's user from its tags
        creation[USER_TAG] = tags.pop(USER_TAG)
    new = target.create_run(experiment_id, start_time=info.start_time, tags=creation, run_name=info.run_name)
    new_id = new.info.run_id
    try:
        for batch in _chunks([RunTag(k, v) for k, v in tags.items()], PARAMS_PER_BATCH):
            target.log_batch(new_id, tags=batch)
        for batch in _chunks([Param(k, v) for k, v in data.params.items()], PARAMS_PER_BATCH):
            target.log_batch(new_id, params=batch)
        history = [source.get_metric_history(info.run_id, k) for k in data.metrics]
        points = [Metric(m.key, m.value, m.timestamp, m.step) for h in history for m in h]
        for batch in _chunks(points, METRICS_PER_BATCH):
            target.log_batch(new_id, metrics=batch)
        if source.list_artifacts(info.run_id):
            with tempfile.TemporaryDirectory(prefix="sweep-migrate-") as tmp:
                target.log_artifacts(new_id, source.download_artifacts(info.run_id, "", tmp))
        target.set_terminated(new_id, info.status, end_time=info.end_time)
    except BaseException:  # failed or Ctrl-C: no half copy stays behind (a kill -9 leaves one for the next run)
        try:
            target.delete_run(new_id)
        except Exception:  # noqa: BLE001 - the first error is the one to report; the next migrate deletes it
            pass
        raise
    return new


def drop(target: Any, run_id: str) -> None:
    """A copy a failed or interrupted migrate left unfinished."""
    target.delete_run(run_id)


def link_parent(target: Any, run_id: str, parent_id: str) -> None:
    """A copy's parent, copied after it."""
    target.set_tag(run_id, PARENT_RUN_TAG, parent_id)


def create_experiment(target: Any, name: str, artifact_location: Optional[str], tags: dict[str, str]) -> str:
    """An experiment the target lacks, with the source's tags."""
    return target.create_experiment(name, artifact_location=artifact_location, tags=tags)


def _chunks(items: list, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
