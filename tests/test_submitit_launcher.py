"""hydra/launcher=submitit_local (hydra-submitit-launcher, real job processes): a sweep is recorded like one on the
project's launcher (one parent, a child per job with the same tags, params and metrics), a failed job is isolated,
and re-running the sweep resumes it. Each submitit job is a fresh Python process: three small sweeps in all."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import FAULTY, run_sweep

pytestmark = pytest.mark.slow
SUBMITIT = "hydra/launcher=submitit_local"


def _runs(store: str, experiment: str) -> tuple[list, list]:
    c = MlflowClient(store)
    runs = c.search_runs([c.get_experiment_by_name(experiment).experiment_id], order_by=["attributes.start_time ASC"])
    return (
        [r for r in runs if r.data.tags.get("sweep.parent") == "true"],
        [r for r in runs if r.data.tags.get("sweep.parent") != "true"],
    )


@pytest.mark.new_store
def test_submitit_local_records_like_the_project_launcher_resumes_and_isolates_failures(store, tmp_path):
    p = run_sweep("-m", SUBMITIT, "method=gf2,km", "mlflow.experiment=sub", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "sweep: 2 job(s) finished, 0 failed, 0 skipped" in p.stdout
    (parent,), children = _runs(store, "sub")
    assert parent.info.status == "FINISHED" and parent.data.tags["launcher"] == "submitit_local"
    assert parent.data.metrics["jobs_finished"] == 2 and parent.data.params["launcher.timeout_min"] == "60"
    assert sorted(c.info.run_name for c in children) == ["method=gf2", "method=km"]
    assert all(
        c.info.status == "FINISHED"
        and c.data.tags["mlflow.parentRunId"] == parent.info.run_id
        and c.data.tags["sweep.route"] == "submitit_local"
        for c in children
    )
    # the jobs ran in their own processes (submitit's), not in the launching one
    assert len(list(tmp_path.glob("multirun/*/*/.submitit/*/*_log.out"))) == 2

    # the same sweep on the project's launcher: the same tags, params and metrics, the same results
    p = run_sweep("-m", "hydra/launcher=local", "method=gf2,km", "mlflow.experiment=own", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    (own_parent,), own_children = _runs(store, "own")
    assert set(parent.data.tags) == set(own_parent.data.tags)
    assert set(parent.data.metrics) == set(own_parent.data.metrics)
    own = {c.info.run_name: c for c in own_children}
    for c in children:
        o = own[c.info.run_name]
        assert set(c.data.tags) == set(o.data.tags) and c.data.params == o.data.params
        assert set(c.data.metrics) == set(o.data.metrics)
        for m in ("accuracy", "epochs", "ard", "dmc", "reads", "writes"):
            assert c.data.metrics[m] == o.data.metrics[m], m
        assert c.data.metrics["cost_usd"] == pytest.approx(c.data.metrics["wall_clock_s"] * 0.08925 / 3600)
        assert c.data.metrics["task_cost_usd"] == pytest.approx(c.data.metrics["cpu_s"] * 0.08925 / 3600)

    # resume: re-running skips both jobs (in their processes) and writes no new child
    p = run_sweep("-m", SUBMITIT, "method=gf2,km", "mlflow.experiment=sub", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "0 job(s) finished, 0 failed, 2 skipped (already done; mlflow.force=true re-runs them: " in p.stdout
    parents, children = _runs(store, "sub")
    assert len(parents) == 2 and len(children) == 2
    assert parents[1].info.status == "FINISHED" and parents[1].data.metrics["jobs_skipped"] == 2

    # a job that raises is a FAILED child with its traceback; the other job finishes; the sweep exits 1
    p = run_sweep(
        "-m", SUBMITIT, *FAULTY, "tracker=none", "method.chunk=2048,13", "mlflow.experiment=bad", cwd=tmp_path
    )
    assert p.returncode == 1
    assert "1 job(s) finished, 1 failed" in p.stderr and "  chunk=13: FAILED" in p.stderr
    (parent,), children = _runs(store, "bad")
    assert parent.info.status == "FAILED" and parent.data.metrics["jobs_failed"] == 1
    assert sorted((c.info.run_name, c.info.status) for c in children) == [
        ("chunk=13", "FAILED"),
        ("chunk=2048", "FINISHED"),
    ]
    failed = [c for c in children if c.info.status == "FAILED"][0]
    tb = MlflowClient(store).download_artifacts(failed.info.run_id, "traceback.txt", str(tmp_path))
    assert "ValueError" in Path(tb).read_text()


def test_bad_input_under_another_launcher_is_refused_before_any_job_or_listed_as_failed(store, tmp_path):
    # Hydra's basic sweeper: the whole grid is checked before any job starts (one line, exit 2, no run)
    p = run_sweep(
        "-m", "hydra/launcher=basic", "method=gf2", "problem.k_sparse=3,25", "mlflow.experiment=refused", cwd=tmp_path
    )
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1] == (
        "sweep: config error in job k_sparse=25: "
        "problem.k_sparse=25 is not allowed: expected an integer with "
        "1 <= k_sparse <= problem.n_bits"
    )
    assert MlflowClient(store).get_experiment_by_name("refused") is None
    # a search makes its jobs as it goes: a bad one is checked where it runs, recorded on the parent as failed
    p = run_sweep(
        "-m",
        "hydra/sweeper=optuna",
        "hydra/launcher=basic",
        "method=gf2",
        "problem.k_sparse=choice(3,25)",
        "+hydra.sweeper.objectives.accuracy=maximize",
        "hydra.sweeper.n_trials=4",
        "+hydra.sweeper.sampler._target_=optuna.samplers.RandomSampler",
        "+hydra.sweeper.sampler.seed=0",
        "hydra.sweeper.trial_key=extra.trial",
        "mlflow.experiment=refused",
        cwd=tmp_path,
    )
    assert p.returncode == 1 and "config error: problem.k_sparse=25 is not allowed" in p.stderr
    (parent,), children = _runs(store, "refused")
    refused = [k for k in parent.data.tags if k.startswith("sweep.refused.")]
    assert parent.info.status == "FAILED" and refused and len(refused) + len(children) == 4
    assert all(c.info.status == "FINISHED" and c.data.params["problem.k_sparse"] == "3" for c in children)


def test_a_slurm_launch_where_slurm_is_not_is_one_line_before_any_run(store, tmp_path):
    """docs/launchers.md's SLURM command on a machine without SLURM: submitit's 40-line traceback ('Could not
    detect "srun"'), after a parent run opened and closed FINISHED with "0 job(s) finished"."""
    import shutil

    if shutil.which("srun"):
        pytest.skip("this machine has SLURM")  # CI's has not: the case a newcomer meets
    slurm = ("hydra/launcher=submitit_slurm", "hydra.launcher.partition=cpu")
    p = run_sweep("-m", *slurm, "method=gf2", "mlflow.experiment=slurm", cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == "", p.stdout + p.stderr
    assert p.stderr.splitlines() == [
        "sweep: hydra/launcher=submitit_slurm submits to SLURM, and this machine has no SLURM (no srun on PATH): run "
        "the command on the cluster's login node (docs/launchers.md: a cluster), or here with hydra/launcher=local"
    ], p.stderr
    assert MlflowClient(store).get_experiment_by_name("slurm") is None
