"""Where the project's files are, whatever the working directory."""
from __future__ import annotations

import os
import subprocess
from functools import lru_cache
from pathlib import Path

# src/sweep/paths.py -> the project root (the package is installed in editable/compat mode or run in place)
PROJECT_ROOT = Path(os.environ.get("SWEEP_ROOT", Path(__file__).resolve().parents[2]))
CONF_DIR = PROJECT_ROOT / "conf"
SWEEPS_DIR = PROJECT_ROOT / "sweeps"
STORE_DIR = PROJECT_ROOT / "mlruns"


def default_tracking_uri() -> str:
    """$MLFLOW_TRACKING_URI if set (MLflow's own convention), else the project's SQLite store."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{STORE_DIR / 'mlflow.db'}"


@lru_cache(maxsize=1)
def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
