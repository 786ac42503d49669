"""A real `mlflow server` on 127.0.0.1 for tests that record into or read from a tracking server.

SQLite-backed, artifacts served by the server (`--serve-artifacts`), one per test module. Import the fixture
into a test module: `from tests.tracking_server import tracking_server  # noqa: F401`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest


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
