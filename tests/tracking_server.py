"""The group's store on 127.0.0.1 for tests and benchmarks that record into or read from one (PostgreSQL, MLflow's
tracking server with logins, as `python -m sweep.server` runs it):
- `session_store(root)` / `stop_session_store(root)`: the test session's one store, shared by every xdist worker
  (conftest.shared_server): the first worker to ask starts the command, the others read its address; the
  session's controller stops it at the end.
- `shared_store(directory)`: one started in this process, for a benchmark or a test of its own.
- `add_user` makes a user through its auth API."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
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


def session_store(root: Path, timeout: float = 300) -> Serving:
    """The store of the test session in directory `root`, started by the first caller of any process (under a lock)
    as the real command, in its own process group so it outlives that worker; the admin's login in
    `root/serving.json` for the others."""
    root.mkdir(exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        known = root / "serving.json"
        if not known.exists():
            known.write_text(json.dumps(_start_command(root, timeout)))
        s = json.loads(known.read_text())
    cfg = ServerConfig(data_dir=root / "store", port=s["port"], db_port=s["db_port"], auth_cache_s=s["auth_cache_s"])
    # db and server: the command's processes, perhaps another worker's children; they are stopped through its pid
    return Serving(uri=s["uri"], username=cfg.admin_username, password=s["password"], config=cfg, db=None, server=None)  # type: ignore[arg-type]


# the session's login cache: shorter than the default (10 s), so the test that waits it out twice waits less
SESSION_AUTH_CACHE_S = 3


def _start_command(root: Path, timeout: float) -> dict[str, Any]:
    root.chmod(0o755)  # PostgreSQL's user (not root) must enter it
    port, db_port, password = free_port(), free_port(), secrets.token_urlsafe(12)
    log = root / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sweep.server", "--data-dir", str(root / "store"), "--port", str(port)]
            + ["--db-port", str(db_port), "--workers", "2", "--auth-cache-s", str(SESSION_AUTH_CACHE_S)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SWEEP_SERVER_ADMIN_PASSWORD": password},
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while "serving http" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc.pid)
            raise RuntimeError(f"sweep.server did not start: {log.read_text()[-3000:]}")
        time.sleep(0.2)
    return {
        "uri": f"http://127.0.0.1:{port}",
        "port": port,
        "db_port": db_port,
        "password": password,
        "pid": proc.pid,
        "auth_cache_s": SESSION_AUTH_CACHE_S,
    }


def stop_session_store(root: Path) -> None:
    """Stop the session's store if one was started (SIGTERM: the command stops what it started), and remove it."""
    known = root / "serving.json"
    if known.exists():
        _stop(json.loads(known.read_text())["pid"])
    shutil.rmtree(root, ignore_errors=True)


def _stop(pid: int, timeout: float = 60) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # a child of this process: reaped, or it stays a zombie
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # whatever is left of its group


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
