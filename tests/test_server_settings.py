"""sweep.server's worker settings: refused when out of range before anything starts, and handed to gunicorn."""

from __future__ import annotations

import subprocess
import sys

from sweep.server.config import ServerConfig
from sweep.server.tracking import command


def test_the_server_runs_under_gunicorns_threaded_workers(tmp_path):
    cmd = command(ServerConfig(data_dir=tmp_path, workers=3, threads=5))
    assert cmd[cmd.index("--workers") + 1] == "3"
    assert cmd[cmd.index("--gunicorn-opts") + 1] == "--worker-class gthread --threads 5"


def test_no_threads_is_refused_before_anything_starts(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "sweep.server", "--data-dir", str(tmp_path / "x"), "--threads", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and p.stderr.startswith("sweep.server: threads=0 is not allowed"), p.stderr
    assert not (tmp_path / "x").exists()
