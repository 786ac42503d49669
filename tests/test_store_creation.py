"""A new store is made whole or not at all: a sweep on a store that does not exist yet is killed (SIGKILL), stopped
(SIGTERM) or interrupted (Ctrl-C: SIGINT to its process group) at several moments of the store's creation, and
every later command, MLflow's own client included, finds either no store or a whole one. Real processes, real
signals; the store's creation begins when a file named for it appears in its directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.record import store
from tests.test_faults import _runs, no_process_left, sweep

GRID = ("-m", "method=gf2", "problem.n_bits=10", "problem.seed=0,1")


def _creation_began(d: Path) -> bool:
    # the store itself (made in place) or the file it is made in beside it; not the creation lock
    return any(p.name.endswith(".lock") is False and "new.db" in p.name for p in d.iterdir())


@pytest.mark.parametrize(
    "sig,delays",
    [(signal.SIGKILL, (0.0, 0.15, 0.3, 0.6)), (signal.SIGTERM, (0.1, 0.3)), (signal.SIGINT, (0.1, 0.3))],
    ids=["SIGKILL", "SIGTERM", "SIGINT"],
)
def test_a_signal_during_a_new_stores_creation_leaves_no_store_or_a_whole_one(tmp_path, sig, delays):
    cut = []  # the delays at which the signal came before the store was whole
    for delay in delays:
        d = tmp_path / f"{delay}"
        d.mkdir()
        db = d / "new.db"
        uri = f"sqlite:///{db}"
        env = {"SWEEP_SPOOL_DIR": str(d / "spool")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "sweep", *GRID, f"mlflow.tracking_uri={uri}"],
            cwd=d,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while not _creation_began(d):
                assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended before making its store"
                time.sleep(0.005)
            time.sleep(delay)
            os.killpg(proc.pid, sig)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        no_process_left(proc.pid)
        cut += [] if db.exists() else [delay]
        if db.exists():  # a whole store: the check passes, MLflow's schema at its head
            store.check(uri, write=True)
        p = sweep(*GRID, f"mlflow.tracking_uri={uri}", env=env, cwd=d)
        assert p.returncode == 0, (delay, p.stderr)
        finished = [r for r in _runs(uri) if r.info.status == "FINISHED" and "problem.seed" in r.data.params]
        assert {r.data.params["problem.seed"] for r in finished} == {"0", "1"}, delay
        assert [p.name for p in d.iterdir() if ".creating-" in p.name] == []  # what a killed creation left: gone
    assert cut, "every signal came after the store was made: no moment of its creation was tested"
