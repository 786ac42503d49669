"""Where the project's files are, whatever the working directory."""

from __future__ import annotations

import os
import re
import subprocess
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

# src/sweep/paths.py -> the project root (the package is installed in editable/compat mode or run in place)
PROJECT_ROOT = Path(os.environ.get("SWEEP_ROOT", Path(__file__).resolve().parents[2]))
CONF_DIR = PROJECT_ROOT / "conf"
SWEEPS_DIR = PROJECT_ROOT / "sweeps"
STORE_DIR = PROJECT_ROOT / "mlruns"


def preset_file(name: str) -> Path | None:
    """sweeps/<name>.yaml where `name` is a preset, else None: a name with a folder in it is none, and so is one
    the filesystem cannot look up (a name of 300 characters: ENAMETOOLONG, which Path.is_file raises)."""
    path = SWEEPS_DIR / f"{name}.yaml"
    try:
        return path if path.parent == SWEEPS_DIR and path.is_file() else None
    except OSError:
        return None


def shown(path: object, most: int = 200) -> str:
    """`path` for a one-line message: whole, or past `most` characters its start and its length (a name too long
    for the filesystem would fill the terminal)."""
    text = str(path)
    return text if len(text) <= most else f"{text[:60]}... ({len(text)} characters)"


def default_tracking_uri() -> str:
    """$MLFLOW_TRACKING_URI if set (MLflow's own convention), else the project's SQLite store."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{STORE_DIR / 'mlflow.db'}"


def store_sibling(name: str, tracking_uri: str | None = None) -> str:
    """An SQLite URL for database file `name` that belongs to one MLflow store (Optuna's studies: `${store_sibling:
    optuna.db,${mlflow.tracking_uri}}`): beside an SQLite store, named after it (`mlflow.db`: `optuna.db`; `runs.db`:
    `runs-optuna.db`), else in <project>/mlruns named after the store's address, without its login. One file
    for every store let a search into a second store (a new file, the group's server) resume the first's study:
    "16 trial(s) done, 0 to run", nothing recorded."""
    uri = tracking_uri or default_tracking_uri()
    if uri.startswith("sqlite:///"):
        store = Path(uri[len("sqlite:///") :].split("?", 1)[0])
        return f"sqlite:///{store.parent / (name if store.name == 'mlflow.db' else f'{store.stem}-{name}')}"
    parts = urlsplit(uri)
    # one server however it is written: its host's case and a trailing / are no other store
    address = parts.netloc.rpartition("@")[2].lower() + parts.path.rstrip("/")
    return f"sqlite:///{STORE_DIR / f'{safe_name(address)}-{name}'}"


def safe_name(name: str) -> str:
    """`name` as one file name: characters other than letters, digits, `.`, `_`, `-` become `_`, and no leading
    dot, so a name such as `../x` or `a/b` can neither climb out of nor descend into a directory."""
    out = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")
    return out or "_"


@lru_cache(maxsize=1)
def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
