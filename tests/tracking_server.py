"""The group's store on 127.0.0.1 for tests and benchmarks that record into or read from one: `shared_store(directory)`
starts it as `python -m sweep.server` does (PostgreSQL, MLflow's tracking server with logins), for the session
(conftest.shared_server) or a benchmark; `add_user` makes a user through its auth API."""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any, Iterator, Optional

from sweep.server.config import ServerConfig
from sweep.server.stack import Serving, serving


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the group's shared store: PostgreSQL and MLflow's tracking server with logins (sweep.server) ---------------


@contextlib.contextmanager
def shared_store(directory: Optional[Path] = None, workers: int = 2, **settings: Any) -> Iterator[Serving]:
    """Start the shared store (`python -m sweep.server`'s PostgreSQL and tracking server with logins) in `directory`
    (default: a new temporary directory every user can enter, removed after) on free ports of 127.0.0.1, as a
    non-root user for PostgreSQL when run as root; yield it: `.uri`, `.username`, `.password`, `.env()` (the
    client's login variables)."""
    made = directory is None
    root = Path(tempfile.mkdtemp(prefix="sweep-server-")) if directory is None else directory
    root.chmod(0o755)  # PostgreSQL's user (not root) must enter it
    cfg = ServerConfig(data_dir=root / "store", port=free_port(), db_port=free_port(), workers=workers, **settings)
    try:
        with serving(cfg, admin_password=secrets.token_urlsafe(12)) as srv:
            yield srv
    finally:
        if made:
            shutil.rmtree(root, ignore_errors=True)


def add_user(srv: Serving, username: str, password: str) -> None:
    """A user of the shared store, made by its admin through MLflow's auth REST API."""
    import requests

    r = requests.post(
        f"{srv.uri}/api/2.0/mlflow/users/create",
        json={"username": username, "password": password},
        auth=(srv.username, srv.password),
        timeout=30,
    )
    assert r.status_code == 200, r.text
