"""Real tracking servers on 127.0.0.1 for tests that record into or read from one.

- `tracking_server` (a fixture): a plain `mlflow server`, SQLite-backed, artifacts served by the server
  (`--serve-artifacts`), one per test module. Import it into a test module:
  `from tests.tracking_server import tracking_server  # noqa: F401`.
- `shared_store(directory)`: the group's store as `python -m sweep.server` runs it (PostgreSQL, logins), for the
  session (conftest.shared_server) or a benchmark."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from sweep.server.config import ServerConfig
from sweep.server.stack import Serving, serving


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(root: Path, timeout: float = 120) -> tuple[subprocess.Popen, str]:
    """Start `mlflow server` with its store and artifacts under `root`; return it and its URI once it answers."""
    port = free_port()
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{root / 'server.db'}",
            "--serve-artifacts",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its workers are stopped with it, as one group
        env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited {proc.returncode}: {(root / 'server.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, uri
        except OSError:
            time.sleep(0.5)
    stop_server(proc)
    raise RuntimeError(f"mlflow server did not answer in {timeout:.0f}s: {(root / 'server.log').read_text()[-2000:]}")


def stop_server(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory) -> Iterator[str]:
    """The URI of a running `mlflow server` (http://127.0.0.1:PORT), stopped after the module's tests."""
    proc, uri = start_server(tmp_path_factory.mktemp("mlflow-server"))
    try:
        yield uri
    finally:
        stop_server(proc)


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
