"""A big grid streams through the launcher: real `python -m sweep` processes, a real MLflow store.

The launching process holds each job small (index, overrides, name, the app's notes) and composes a job's config
only to check it and again just before it runs, so its memory before the first job does not grow with the grid
(it grew ~200 KB a job); every job is still checked before any starts. Time to the first job and memory at 1k,
10k and 50k jobs: benchmarks/bench_grid.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_sweep

GRID = 10_000
# the launching process's peak resident set before its first job: ~250 MB whatever the grid; holding every
# job's composed config it passed this bound before a tenth of this grid was composed
BOUND_MB = 400
# what the launching process keeps per finished job while the sweep runs (its resident set's growth): ~3 KB
# (the sweeper's JobReturn with the run's metrics); ~9 KB while each result kept its config, tags and curves
PER_FINISHED_KB = 6


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    from sweep.record.recorder import Recorder

    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    Recorder(uri, "warmup")
    return uri


def peak_mb(pid: int) -> float:
    """The process's peak resident set so far (VmHWM), in MB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the launcher's memory from /proc")
def test_a_big_grids_launcher_memory_before_its_first_job_does_not_grow_with_the_grid(store, tmp_path):
    env = {**os.environ, "MLFLOW_TRACKING_URI": store, "PYTHONPATH": str(ROOT)}
    args = ["method=gf2", "tracker=none", f"problem.seed=range(0,{GRID})", "mlflow.experiment=big_grid"]
    p = subprocess.Popen(
        [sys.executable, "-m", "sweep", "-m", *args, "hydra.launcher.n_workers=2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first: list[str] = []
    err: list[str] = []

    def read_stdout() -> None:
        for line in p.stdout:  # type: ignore[union-attr]
            if line.startswith("[FINISHED]") and not first:
                first.append(line)

    threading.Thread(target=read_stdout, daemon=True).start()
    threading.Thread(target=lambda: err.extend(p.stderr), daemon=True).start()  # type: ignore[arg-type]
    peak, deadline = 0.0, time.monotonic() + 900
    try:
        while not first and p.poll() is None and time.monotonic() < deadline:
            peak = max(peak, peak_mb(p.pid))
            if peak > BOUND_MB:
                break  # memory grows with the grid: no need to wait for it to reach GBs
            time.sleep(0.1)
        peak = max(peak, peak_mb(p.pid))
        assert first, f"no job finished (peak {peak:.0f} MB, exit {p.poll()}):\n{''.join(err)[-3000:]}"
        assert peak < BOUND_MB, f"launcher peak before its first job {peak:.0f} MB for {GRID} jobs"
        p.send_signal(signal.SIGTERM)  # the rest would take minutes: stopped as a user stops it
        assert p.wait(timeout=300) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # the record: the first jobs ran and were recorded, the sweep's parent says it was stopped, nothing RUNNING
    c = MlflowClient(store)
    runs = c.search_runs([c.get_experiment_by_name("big_grid").experiment_id], max_results=GRID)
    children = [r for r in runs if r.data.tags.get("sweep.parent") != "true"]
    assert [r.info.status for r in runs if r.data.tags.get("sweep.parent") == "true"] == ["KILLED"]
    assert any(r.info.status == "FINISHED" for r in children)
    assert {r.info.status for r in children} <= {"FINISHED", "KILLED"}
    assert "not started" in "".join(err)


def current_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the launcher's memory from /proc")
def test_the_launcher_keeps_little_of_each_finished_job(store, tmp_path):
    # a 50,000-job sweep ends under ~500 MB only if a finished job costs the launcher a few KB at most
    env = {**os.environ, "MLFLOW_TRACKING_URI": store, "PYTHONPATH": str(ROOT)}
    args = ["method=gf2", "tracker=none", "problem.seed=range(0,1000)", "mlflow.experiment=kept_per_job"]
    p = subprocess.Popen(
        [sys.executable, "-m", "sweep", "-m", *args, "hydra.launcher.n_workers=2", "hydra.launcher.progress=false"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    seen: dict[int, float] = {}
    finished = 0
    for line in p.stdout:  # type: ignore[union-attr]
        if line.startswith("[FINISHED]"):
            finished += 1
            if finished in (250, 975):  # from 250 on: the store's and the workers' pipes are warm
                seen[finished] = current_mb(p.pid)
    assert p.wait(timeout=300) == 0
    per_job_kb = (seen[975] - seen[250]) * 1024 / 725
    assert per_job_kb < PER_FINISHED_KB, f"the launcher grew {per_job_kb:.1f} KB a finished job"


def test_a_bad_job_after_thousands_of_good_ones_is_refused_before_any_job_starts(store, tmp_path):
    # jobs 0..1999 are fine, 2000.. are not: the check streams over all of them before the first one runs
    p = run_sweep(
        "-m",
        "method=gf2",
        "tracker=none",
        "problem.k_sparse=3,25",
        "problem.seed=range(0,2000)",
        "mlflow.experiment=late_refusal",
        "hydra.launcher.n_workers=1",
        cwd=tmp_path,
        env={"MLFLOW_TRACKING_URI": store},
        timeout=600,
    )
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.strip().splitlines()[-1] == (
        "sweep: config error in job k_sparse=25 seed=0: "
        "problem.k_sparse=25 is not allowed: expected an integer with 1 <= k_sparse <= problem.n_bits"
    )
    assert "[FINISHED]" not in p.stdout
    assert MlflowClient(store).get_experiment_by_name("late_refusal") is None  # no run, no parent


def test_a_bad_route_is_refused_in_one_line_before_any_job(store, tmp_path):
    p = run_sweep(
        "-m",
        "method=gf2",
        "problem.seed=1,2",
        "hydra.launcher.route=gpu",
        "mlflow.experiment=bad_route",
        cwd=tmp_path,
        env={"MLFLOW_TRACKING_URI": store},
    )
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "sweep: hydra.launcher.route='gpu' is not allowed: expected device, local or modal"
    ]
    assert "[FINISHED]" not in p.stdout
    assert MlflowClient(store).get_experiment_by_name("bad_route") is None


def test_a_long_check_pass_says_how_far_it_is_at_each_tenth(monkeypatch, capsys):
    """A prober's round of issue 43: a 1M-job grid spent 90 s checking its jobs before the first started, saying
    nothing. A pass over at least PACE_MIN_JOBS that lasts PACE_AFTER_S says how far it is at each tenth, on
    stderr; a short one (under the time, or a small grid) says nothing."""
    from hydra_plugins.sweep_launcher import _launch

    now = [100.0]
    monkeypatch.setattr(_launch.time, "monotonic", lambda: now[0])
    pace = _launch.Pace(2000)
    for done in range(1, 2001):
        now[0] += 0.003  # 6 s in all: silent for its first 2 s
        pace(done)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "sweep: checked 800 of 2,000 job(s) (40%, 2 s); none starts before all are", lines
    assert [ln.split()[2] for ln in lines] == ["800", "1,000", "1,200", "1,400", "1,600", "1,800", "2,000"]
    small = _launch.Pace(999)
    now[0] += 60
    small(999)
    assert capsys.readouterr().err == ""
