"""A sweep whose recording cannot start runs no job: Hydra turns a callback's exception into a warning and goes
on, so an unforeseen failure in MLflowCallback.on_multirun_start would have run every job and recorded none
(found with an MLflow whose migration scripts were missing: the store check's assertion, then 2,048 jobs run and
lost). Here the failure is planted in a real `python -m sweep -m` process."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

# the sweep's own entry point, after its store check is made to fail as no check foresees
PLANTED = (
    "import sys\n"
    "from sweep.record import store\n"
    "def broken(*a, **k):\n"
    "    raise RuntimeError('planted: the check itself broke')\n"
    "store.check = broken\n"
    "from sweep.__main__ import main\n"
    "sys.argv = ['sweep', *sys.argv[1:]]\n"
    "main()\n"
)


def test_a_sweep_whose_recording_cannot_start_runs_no_job(store, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    r = subprocess.run(
        [sys.executable, "-c", PLANTED, "-m", "method=gf2", "problem.seed=range(0,3)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "sweep: the recording could not start, no job was run: RuntimeError: planted" in r.stderr
    assert "[FINISHED]" not in r.stdout and not (tmp_path / "multirun").exists()
