"""A run's files, written where its store keeps them: straight into a local artifact directory, else uploaded
through MLflow's artifact repository alongside the run's other writes (a tracking server answers each request in
tens of ms, so they are made at once, not in turn)."""

from __future__ import annotations

import functools
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

UPLOADS = 8  # a run's writes to a tracking server made at once (its batch and its files)


def write_into(directory: Path, files: dict[str, str]) -> None:
    """The files (name -> text) written under `directory`, their folders made."""
    for fname, text in files.items():
        (directory / fname).parent.mkdir(parents=True, exist_ok=True)
        (directory / fname).write_text(text)


def upload(repository: Callable[[], Any], files: dict[str, str], calls: list, at_once: bool) -> None:
    """The files uploaded to `repository()` (made only where there are files), with the run's other writes
    (`calls`), at once or in turn."""
    with tempfile.TemporaryDirectory() as tmp:
        write_into(Path(tmp), files)
        repo = repository() if files else None
        calls = [*calls, *(functools.partial(_upload, repo, Path(tmp), f) for f in files)]
        if len(calls) == 1 or not at_once:
            for call in calls:
                call()
            return
        with ThreadPoolExecutor(max_workers=min(len(calls), UPLOADS)) as pool:
            for done in [pool.submit(c) for c in calls]:
                done.result()


def repository(artifact_uri: str, tracking_uri: str) -> Any:
    """MLflow's artifact repository of a run's `artifact_uri`."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it

    return get_artifact_repository(artifact_uri, tracking_uri=tracking_uri)


def _upload(repo: Any, tmp: Path, fname: str) -> None:
    parent = str(Path(fname).parent)
    repo.log_artifact(str(tmp / fname), artifact_path=None if parent == "." else parent)
