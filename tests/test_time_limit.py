"""The launcher's time limit (`hydra.launcher.time_limit_s`, or a preset's `time_limit_s`): a job past it is
recorded FAILED with the reason, its worker is gone, and the rest of the sweep finishes. In a batch only the slow
job fails: the one whose solve ran past its own limit (the app says when each begins: `timer.begin`), or, where
nothing says which, the one found when the batch's jobs run again one at a time."""

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
    # two batches on one worker, under a 2 s limit a run: gf2's runs are solved one after another and each says
    # when its solve begins, so seed 0 alone is killed at 2 s and seeds 1 and 2 run again as a batch; the other
    # class's solve_batch says nothing, so its batch of seeds 0 and 1 is killed at 2 x 2 s and its runs go again
    # one at a time
    stuck = "tests.worker_pid.StuckSeed0GF2,tests.worker_pid.StuckSeed0BatchGF2"
    p = run_sweep(
        "-m", "method=gf2", f"method._target_={stuck}", "tracker=none", "problem.seed=0,1,2",
        "hydra.launcher.n_workers=1", "hydra.launcher.batch=3", "hydra.launcher.time_limit_s=2",
        "mlflow.experiment=stuck", cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    pids = [
        int(pid)
        for pid in re.findall(
            r"\[FAILED\] .*: ran past the time limit of 2 s \(worker process (\d+) killed\)", p.stderr
        )
    ]
    batch = re.search(
        r"a batch of 3 jobs ran past 3 x 2 s \(worker process (\d+) killed\): its jobs run again", p.stderr
    )
    assert len(pids) == 2 and batch, p.stderr
    assert all(gone(pid) for pid in [*pids, int(batch[1])])
    assert "4 job(s) finished, 2 failed" in p.stderr
    runs = {
        (r.data.params["method._target_"].rsplit(".")[-1], r.data.params["problem.seed"]): r
        for r in children(store, "stuck")
    }
    assert {k: r.info.status for k, r in runs.items()} == {
        (cls, seed): "FAILED" if seed == "0" else "FINISHED"
        for cls in ("StuckSeed0GF2", "StuckSeed0BatchGF2")
        for seed in ("0", "1", "2")
    }
    for cls in ("StuckSeed0GF2", "StuckSeed0BatchGF2"):
        assert runs[cls, "0"].data.tags["sweep.time_limit_s"] == "2"
        assert "sweep.time_limit_s" not in runs[cls, "1"].data.tags and runs[cls, "1"].data.metrics["accuracy"] == 1.0
    # the runs that said when they began went on as a batch; the others one at a time
    assert (
        runs["StuckSeed0GF2", "1"].data.tags["sweep.batch.id"] == runs["StuckSeed0GF2", "2"].data.tags["sweep.batch.id"]
    )
    assert "sweep.batch.id" not in runs["StuckSeed0BatchGF2", "1"].data.tags
    parent = next(
        r
        for r in MlflowClient(store).search_runs([runs["StuckSeed0GF2", "0"].info.experiment_id])
        if r.data.tags.get("sweep.parent")
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
