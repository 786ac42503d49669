"""The writes the project makes on runs it has already recorded (outside a sweep's own recording): the study's view
tags (`sweep.report.ui`), compare's files on the parent run (`sweep.report.compare`), rescore's figures
(`sweep.rescore`). Each is made on the client a `sweep.record.registry.Store` opened (MLflow's, or for an SQLite
store at the known schema the recorder's `SqliteClient`, which takes the same tag calls), so that what is written
to a store, and how, is said here alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

METRICS_PER_BATCH = 1000  # MLflow's most metrics in one log_batch


def tag_runs(client: Any, tags: dict[str, dict[str, str]]) -> None:
    """Tags on runs: run id -> {key: value}."""
    for run_id, kv in tags.items():
        for key, value in kv.items():
            client.set_tag(run_id, key, value)


def tag_experiment(client: Any, experiment_id: str, tags: dict[str, str]) -> None:
    """Tags on an experiment, in the order given."""
    for key, value in tags.items():
        client.set_experiment_tag(experiment_id, key, value)


def log_files(client: Any, run_id: str, files: Sequence[Path], folder: str) -> None:
    """Files under `folder` of the run's artifacts."""
    for f in files:
        client.log_artifact(run_id, str(f), artifact_path=folder)


def add_figures(
    client: Any,
    run_id: str,
    metrics: Iterable[tuple[str, float, int, int]],
    texts: dict[str, str],
    last_tag: tuple[str, str],
) -> None:
    """Metrics (key, value, timestamp ms, step), text files (artifact path -> text) and, last, one tag on a run: a run
    that carries the tag has all the rest."""
    from mlflow.entities import Metric  # noqa: PLC0415 - MLflow: seconds to import

    points = [Metric(*m) for m in metrics]
    for i in range(0, len(points), METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=points[i : i + METRICS_PER_BATCH])
    for path, text in texts.items():
        client.log_text(run_id, text, path)
    client.set_tag(run_id, *last_tag)
