"""The launcher's time limit (`hydra.launcher.time_limit_s`, or a preset's `time_limit_s`): a job past it is
recorded FAILED with the reason, its worker is gone, and the rest of the sweep finishes; a batch past its limit
runs its jobs again one at a time, so only the slow one fails."""

from __future__ import annotations

import os
import re

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_sweep

STUCK = ("method=gf2", "method._target_=tests.worker_pid.StuckSeed0GF2", "tracker=none")


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def children(uri: str, experiment: str) -> list:
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name(experiment)
    return [r for r in c.search_runs([exp.experiment_id]) if r.data.tags.get("sweep.parent") != "true"]


@pytest.mark.slow
def test_a_stuck_job_is_killed_at_its_limit_and_the_sweep_goes_on(store, tmp_path):
    # seeds 0-2 as one batch on one worker: the batch passes 3 x 2 s, is killed, and its jobs run again alone:
    # seed 0 is killed at 2 s, seeds 1 and 2 finish
    p = run_sweep(
        "-m", *STUCK, "problem.seed=0,1,2", "hydra.launcher.n_workers=1", "hydra.launcher.batch=3",
        "hydra.launcher.time_limit_s=2", "mlflow.experiment=stuck", cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    batch_pid = int(re.search(r"a batch of 3 jobs ran past 3 x 2 s \(worker process (\d+) killed\)", p.stderr)[1])
    line = re.search(
        r"\[FAILED\] problem\.seed=0: ran past the time limit of 2 s \(worker process (\d+) killed\)", p.stderr
    )
    assert line, p.stderr
    assert gone(batch_pid) and gone(int(line[1]))
    assert "2 job(s) finished, 1 failed" in p.stderr
    runs = {r.data.params["problem.seed"]: r for r in children(store, "stuck")}
    assert {s: r.info.status for s, r in runs.items()} == {"0": "FAILED", "1": "FINISHED", "2": "FINISHED"}
    assert runs["0"].data.tags["sweep.time_limit_s"] == "2"
    assert "sweep.time_limit_s" not in runs["1"].data.tags
    assert runs["1"].data.metrics["accuracy"] == 1.0 and "sweep.batch.id" not in runs["1"].data.tags  # alone
    parent = next(
        r for r in MlflowClient(store).search_runs([runs["0"].info.experiment_id]) if r.data.tags.get("sweep.parent")
    )
    assert parent.data.params["launcher.time_limit_s"] == "2.0"


@pytest.mark.parametrize("setting", ["hydra.launcher.time_limit_s", "time_limit_s"])
@pytest.mark.parametrize("value", ["0", "-1", "inf"])
def test_a_bad_time_limit_is_refused_in_one_line(store, tmp_path, setting, value):
    p = run_sweep("-m", "method=gf2", "problem.seed=1,2", f"{setting}={value}", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        f"sweep: {setting}={float(value)!r} is not allowed: expected a number of seconds > 0 (the most a job may "
        "run), or null (no limit)"
    ]
