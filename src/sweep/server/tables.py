"""MLflow's tables (the runs' and the logins'), made in a new cluster before it is put in place.

Left to the tracking server, a first start made them with every DDL statement's commit flushed to disk: ~30 s of
waiting for the disk on a 2-core machine (2026-11-28; docs/results/suite.md), where a later start takes ~10 s. The
new cluster is not in place yet and holds nothing else, so it runs once with `fsync=off`, MLflow's own commands make
the tables (`mlflow db upgrade`; the auth app's `db upgrade`), it stops cleanly, and `initdb --sync-only` writes
what it wrote to disk, as PostgreSQL's documentation asks before fsync is on again. The tracking server then
finds its tables at their head and only makes the Default experiment and the admin, as it does on every start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sweep.server import postgres
from sweep.server.config import ServerConfig
from sweep.server.postgres import Owner, ServerError
from sweep.server.tracking import database_uri


def make(pgdata: Path, owner: Owner, cfg: ServerConfig, password: str, log: Path, timeout_s: float) -> None:
    """Make MLflow's tables in the cluster at `pgdata` (not yet started), and leave it stopped (its caller syncs it)."""
    db = postgres.start(pgdata, owner, cfg.db_port, log, fsync=False)
    try:
        postgres.wait_ready(db, cfg.db_user, password, cfg.db_port, log, timeout_s)
        postgres.create_databases(cfg.db_user, password, cfg.db_port)
        uris = [database_uri(cfg, name) for name in postgres.DATABASES]
        try:
            done = subprocess.run(
                [sys.executable, "-m", "sweep.server.tables", *uris],
                env={**os.environ, "PGPASSWORD": password},
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise ServerError(f"MLflow's tables were not made in {timeout_s:.0f} s") from None
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise ServerError(f"making MLflow's tables failed: {lines[-1] if lines else done.returncode}")
    finally:
        postgres.stop(db)


def _upgrade(runs_uri: str, auth_uri: str) -> None:
    """MLflow's two `db upgrade` commands (the tracking store's, the auth app's), in one process: one import."""
    from mlflow.db import upgrade  # noqa: PLC0415 - MLflow: seconds to import, only in this child
    from mlflow.server.auth.db.cli import upgrade as auth_upgrade  # noqa: PLC0415

    upgrade.main([runs_uri], standalone_mode=False)
    auth_upgrade.main(["--url", auth_uri], standalone_mode=False)


if __name__ == "__main__":
    _upgrade(*sys.argv[1:3])
