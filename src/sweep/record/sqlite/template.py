"""A new SQLite store copied from a template: MLflow's migrated empty schema, kept once per MLflow version and
schema revision in the user's cache.

MLflow makes a store by running its alembic migrations one by one (some 60; seconds on a loaded 2-core machine,
with seconds of imports before them), and every new store gets the same tables, the same revision and one row in
`experiments` (MLflow's Default, whose artifact location and times are the store's own) and one in `workspaces`.
So the first store a version of MLflow makes is made by MLflow itself (`sweep.record.creation`) and kept here;
every later one is that file copied and its Default experiment's three fields written (milliseconds), which is
what MLflow would have written: tests/test_store_template.py compares the two, and opens the copy with MLflow's
own client (no migration needed: its revision is MLflow's head).

The template is named for MLflow's version and its migrations' head, and checked before each use (that revision,
no run, no experiment but Default); one that is not so, or a cache that cannot be written, only costs the slow
path. `SWEEP_CACHE_DIR` moves the cache (default: `$XDG_CACHE_HOME/sweep`, else `~/.cache/sweep`).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from importlib.metadata import version
from pathlib import Path
from typing import Optional

from sweep.record.sqlite.schema import mlflow_head, schema_facts

DEFAULT_EXPERIMENT_ID = 0  # MLflow's Default experiment, made with every store


def cache_dir() -> Path:
    """Where the templates are kept: $SWEEP_CACHE_DIR, else the user's cache directory (XDG's)."""
    if own := os.environ.get("SWEEP_CACHE_DIR"):
        return Path(own)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sweep"


def template_path() -> Path:
    """The template of the installed MLflow: its version and the head of its schema migrations in the name."""
    return cache_dir() / f"mlflow-{version('mlflow')}-{mlflow_head()[0]}.db"


def usable() -> Optional[Path]:
    """The template, if there and at this MLflow's head with nothing in it but Default; else None (a damaged one
    is removed, to be kept again by the next store MLflow makes)."""
    path = template_path()
    if not path.is_file():
        return None
    try:
        tables, revision, runs, experiments, _ = schema_facts(path)
    except sqlite3.Error:
        revision = None
    else:
        if revision == mlflow_head()[0] and runs == 0 and experiments == 0 and "experiments" in tables:
            return path
    path.unlink(missing_ok=True)
    return None


def keep(made: Path) -> None:
    """Keep `made`, a store MLflow has just made (its migrations run, nothing written in it yet), as the template:
    copied aside in the cache and renamed into place (two makers at once: one rename wins, both whole). A cache
    that cannot be written is no error: the next store is made by MLflow again."""
    target = template_path()
    aside = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(made, aside)
        _sync(aside)
        os.rename(aside, target)
    except OSError:
        aside.unlink(missing_ok=True)


def copy_into(template: Path, aside: Path, artifact_root: str) -> None:
    """A new store at `aside` from the template: the file copied, MLflow's Default experiment given this store's
    artifact location (`<root>/0`, as MLflow's `_get_artifact_location(0)` makes it) and times, the file synced."""
    shutil.copyfile(template, aside)
    now = int(time.time() * 1000)
    conn = sqlite3.connect(aside, isolation_level=None)
    try:
        conn.execute(
            "UPDATE experiments SET artifact_location = ?, creation_time = ?, last_update_time = ? "
            "WHERE experiment_id = ?",
            (f"{artifact_root.rstrip('/')}/{DEFAULT_EXPERIMENT_ID}", now, now, DEFAULT_EXPERIMENT_ID),
        )
    finally:
        conn.close()
    _sync(aside)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
