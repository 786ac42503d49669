"""`python -m sweep.ui`: the tags that make MLflow open a study on its runs, the address a sweep ends with (also
after a re-run that had nothing left to do), an unknown study refused in one line (without a browser); and the
command as a user runs it: the printed address (port, store), the no-store message, and that SIGTERM or Ctrl-C
stops everything it started (MLflow's server and its workers): real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from hydra_plugins.sweep_launcher.api import command
from sweep.report import ui
from sweep.report.queries import find_parent
from tests import forked_sweep
from tests.conftest import record_small_sweep
from tests.conftest import session_processes as _session

STARTING = "starting MLflow's server (its addresses follow once it answers)"  # its first line


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_no_store_says_so_and_creates_nothing(tmp_path):
    uri = f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}"
    p = forked_sweep.python_m("sweep.ui", "--tracking-uri", uri, timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip() == f"python -m sweep.ui: no store at {uri} yet: run a job first ({command('sweep')})"
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_ui_serves_the_store_and_a_signal_stops_all_it_started(tmp_path, sig, code):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rec, parent, results = record_small_sweep(uri, "demo", "demo", "problem.n_bits=10")
    rec.end_parent(parent, "FINISHED", results)
    port = _free_port()
    # as from a user's shell: none of the CI and test markers that turn MLflow's usage telemetry off by themselves
    shell = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_CURRENT_TEST", "DO_NOT_TRACK")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweep.ui", "--port", str(port), "--tracking-uri", uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=shell,
    )
    leader = None
    try:
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line and f"(store {uri})" in line, line
        # then each study's address (its view loaded with it)
        assert proc.stdout.readline() == f"  demo: {ui.runs_url(port=port, experiment_id=rec.experiment_id)}\n"
        # printed once the server answers: the address opens at once, no "connection refused"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            assert r.status == 200
        (leader,) = _children(proc.pid)
        started = _session(leader)
        assert leader in started
        # no MLflow job runner: a process that slows the start and serves nothing the runs need
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() for pid in started]
        assert not any("mlflow.server.jobs" in c for c in commands), commands
        # no network at run time: MLflow's telemetry (a lookup of mlflow-telemetry.io) is off in every process
        for pid in started:  # (its own /proc environ is the one it was started with)
            assert b"\0DO_NOT_TRACK=true\0" in b"\0" + Path(f"/proc/{pid}/environ").read_bytes(), pid
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == code
        err = proc.stderr.read()
        assert err.startswith(f"python -m sweep.ui: {STARTING}"), err
        # one line says it stopped: not uvicorn's four of shutting down before it ("INFO:     Shutting down", ...)
        assert "shutdown" not in err.lower() and "Shutting down" not in err, err
        stopped = f"python -m sweep.ui: stopped ({sig.name}); the server and its workers are stopped"
        assert err.splitlines()[-1] == stopped, err
        deadline = time.monotonic() + 20
        while _session(leader) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _session(leader) == [], "a process the UI started outlived it"
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _session(leader) if leader else []:
            os.kill(pid, signal.SIGKILL)


def test_a_taken_port_is_refused_at_once(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    record_small_sweep(uri, "demo", "demo", "problem.n_bits=10")
    with socket.socket() as taken:  # someone else's server on the port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        p = forked_sweep.python_m("sweep.ui", "--port", str(port), "--tracking-uri", uri, timeout=120)
        # a misspelt study is the user's own input: said first (exit 2), as with the port free
        wrong = forked_sweep.python_m("sweep.ui", "demp", "--port", str(port), "--tracking-uri", uri, timeout=120)
    assert (wrong.returncode, wrong.stdout) == (2, "") and "study: " in wrong.stderr, wrong.stderr
    assert "taken" not in wrong.stderr and "did you mean demo?" in wrong.stderr, wrong.stderr
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr.strip() == (
        f"python -m sweep.ui: --port {port} on 127.0.0.1 is taken (Address already in use): another "
        "MLflow UI? choose another --port"
    )


def test_a_server_that_stops_before_it_answers_says_why_in_one_line(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    record_small_sweep(uri, "demo", "demo", "problem.n_bits=10")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweep.ui", "--port", str(_free_port()), "--tracking-uri", uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    leader = None
    try:
        first = proc.stderr.readline()  # at once: the progress line, while MLflow's server starts
        assert first.startswith(f"python -m sweep.ui: {STARTING}"), first
        (leader,) = _children(proc.pid)
        os.kill(leader, signal.SIGKILL)  # the server dies before it answers
        assert proc.wait(timeout=60) == 1
        assert proc.stdout.read() == ""  # no address that would not open
        last = proc.stderr.read().strip().splitlines()[-1]
        assert last.startswith("python -m sweep.ui: MLflow's server stopped (exit -9) before it answered: "), last
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _session(leader) if leader else []:
            os.kill(pid, signal.SIGKILL)


def test_run_names_sort_numerically():
    names = ["t100", "t250", "t50", "t500", "lr=0.1", "lr=0.05", "seed=42 n=8", "seed=7 n=12"]
    assert sorted(names, key=ui.order_key) == [
        "lr=0.05",
        "lr=0.1",
        "seed=7 n=12",
        "seed=42 n=8",
        "t50",
        "t100",
        "t250",
        "t500",
    ]


def test_study_view_and_next_steps(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rec, parent, results = record_small_sweep(uri, "ui-tags", "ui_tags", "problem.n_bits=10", "tracker=none")
    rec.end_parent(parent, "FINISHED", results)
    line = ui.next_steps(rec.client, uri, rec.experiment_id, parent)
    compare, show = (command(m, "ui_tags", "--tracking-uri", uri) for m in ("sweep.compare", "sweep.ui"))
    assert line == (
        f"next: {compare}  ·  {show}  →  http://127.0.0.1:5000/#/experiments/{rec.experiment_id}/runs"
        "?workflowType=machine_learning&viewStateShareKey=sweep"
    )
    tags = MlflowClient(uri).get_experiment(rec.experiment_id).tags
    assert tags[ui.KIND_TAG] == "custom_model_development"  # set when the recorder created the experiment
    view = json.loads(tags[ui.VIEW_TAG_PREFIX + ui.VIEW_KEY])
    assert view["searchFilter"] == f"tags.`mlflow.parentRunId` = '{parent}'"
    assert "metrics.`accuracy`" in view["selectedColumns"] and "metrics.`cost_usd`" in view["selectedColumns"]
    # the runs the view lists are the sweep's children, sorted on their names with numbers zero-padded
    listed = rec.client.search_runs([rec.experiment_id], filter_string=view["searchFilter"])
    assert {r.info.run_id for r in listed} == {r.run_id for r in results}
    assert view["orderByKey"] == f"tags.`{ui.ORDER_TAG}`" and view["orderByAsc"] is True
    assert all(r.data.tags[ui.ORDER_TAG] == ui.order_key(r.info.run_name) for r in listed)

    # a re-run whose jobs were all done already (skipped) has no child runs: its line shows the earlier sweep's
    rerun = rec.start_parent("sweep sweeps=ui_tags", {"sweep.overrides": "sweeps=ui_tags", "launcher": "basic"})
    rec.end_parent(rerun, "FINISHED", [])
    assert ui.next_steps(rec.client, uri, rec.experiment_id, rerun) == line
    assert find_parent(rec.client, "ui_tags").info.run_id == parent

    # a resume that re-ran one job (its earlier run FAILED): the view lists the sweep whole, each job's latest run
    from sweep import job
    from tests.conftest import compose

    rec.client.set_terminated(results[0].run_id, "FAILED")
    resumed = rec.start_parent("sweep sweeps=ui_tags", {"sweep.overrides": "sweeps=ui_tags", "launcher": "basic"})
    again = job.run(compose("method=gf2", "problem.seed=42", "problem.n_bits=10", "tracker=none"))
    rec.log(again, parent_run_id=resumed)
    rec.end_parent(resumed, "FINISHED", [again])
    ui.next_steps(rec.client, uri, rec.experiment_id, resumed)
    view = json.loads(MlflowClient(uri).get_experiment(rec.experiment_id).tags[ui.VIEW_TAG_PREFIX + ui.VIEW_KEY])
    listed = rec.client.search_runs([rec.experiment_id], filter_string=view["searchFilter"])
    assert {r.info.run_id for r in listed} == {again.run_id} | {r.run_id for r in results[1:]}

    assert ui.main(["no_such_study", "--tracking-uri", uri]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("sweep-ui")]  # MLflow logs too
    assert len(err) == 1 and err[0].startswith("sweep-ui: study: no sweep parent run found for 'no_such_study'")


def test_a_study_opens_on_its_key_metrics_as_columns_and_first_charts(tmp_path):
    """tiled_w1's key metric cache_hit_rate was no column, and the chart view opened on 42 charts sorted by name
    (a tracker's all-zero DRAM_* levels first): the view selects the study's key metrics, then the usual columns,
    and sets the chart view to them first (MLflow appends the other metrics' charts after them)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rec, parent, results = record_small_sweep(uri, "tiled_w1", "tiled_w1", "problem.n_bits=10", "tracker=energy")
    rec.end_parent(parent, "FINISHED", results)
    ui.study_view(rec.client, rec.client.get_run(parent))
    view = json.loads(MlflowClient(uri).get_experiment(rec.experiment_id).tags[ui.VIEW_TAG_PREFIX + ui.VIEW_KEY])
    first = ["ard", "cache_hit_rate", "energy_pj", "accuracy"]  # sweeps/tiled_w1.yaml's compare.metrics
    assert view["selectedColumns"][:4] == [f"metrics.`{m}`" for m in first]
    assert {"metrics.`wall_clock_s`", "metrics.`cost_usd`"} <= set(view["selectedColumns"])
    assert [c["metricKey"] for c in view["compareRunCharts"]][:4] == first
    (section,) = view["compareRunSections"]
    assert section["name"] == "Model metrics" and section["isReordered"] is True
    assert all(c["metricSectionId"] == section["uuid"] for c in view["compareRunCharts"])


def test_a_challenge_opens_on_what_its_leaderboard_judges_and_ranks_by():
    """A newcomer's first hour: `sweep-ui parity_challenge`, as the round's last line says, showed ard but no dmd,
    the figure the leaderboard ranks by (the preset names no compare.metrics: the registry's accuracy, epochs and
    wall-clock were its key metrics)."""
    from sweep.report.study import key_metrics, study_settings

    assert key_metrics(study_settings("parity_challenge")) == ["accuracy", "dmd", "escaped"]
    assert key_metrics(study_settings("char_challenge"))[:3] == ["accuracy", "train_energy_measured_j", "energy_pj"]


def test_a_port_or_host_no_server_can_listen_on_is_one_line_before_anything(capsys):
    """A prober's round of issue 43: `--port 99999` was socket's OverflowError traceback, `--port 0` started
    MLflow's server on a port nobody is told of, and a host that is no address was called a taken port."""
    from sweep.report.ui import main  # noqa: PLC0415

    for args, said in (
        (["--port", "99999"], "sweep-ui: --port 99999 is not allowed: a port from 1 to 65535"),
        (["--port", "0"], "sweep-ui: --port 0 is not allowed: a port from 1 to 65535"),
        (["--host", "999.1.1.1"], "sweep-ui: --host 999.1.1.1 is not an address of this machine ("),
        (["--host", "10.1.2.3"], "sweep-ui: --host 10.1.2.3 is not an address of this machine (Cannot assign"),
    ):
        assert main([*args, "--tracking-uri", "sqlite:////nonexistent/mlflow.db"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(said) and err.count("\n") == 1, err


def test_an_ipv6_host_is_bracketed_in_the_printed_address():
    """`sweep-ui --host ::1` printed http://::1:5091/#/..., which no browser opens (nor urllib reads)."""
    from urllib.parse import urlsplit

    url = ui.runs_url(host="::1", port=5091, experiment_id="3")
    assert url.startswith("http://[::1]:5091/#/experiments/3/") and (urlsplit(url).hostname, urlsplit(url).port) == (
        "::1",
        5091,
    )
    assert ui.runs_url(host="127.0.0.1", port=5000).startswith("http://127.0.0.1:5000/#/experiments")


def test_a_command_a_line_prints_names_the_store_without_its_password(store):
    """A store given as a setting (mlflow.tracking_uri=..., not $MLFLOW_TRACKING_URI) is named in the commands a
    run's and a sweep's last lines print (`sweep-ui --tracking-uri ...`): its password was there in the clear. The
    address is printed without it, which the environment's login completes (PGPASSWORD, ~/.pgpass,
    MLFLOW_TRACKING_PASSWORD)."""
    pg, http = "postgresql://sweep:s3cret-pw@127.0.0.1:5499/mlflow", "http://alice:s3cret-pw@mlflow-host:5000"
    said = ui.recorded_line(pg, "sweep", "1", "0" * 32)
    assert "s3cret-pw" not in said and "--tracking-uri postgresql://sweep@127.0.0.1:5499/mlflow " in said, said
    assert ui._store_args(http) == ("--tracking-uri", "http://alice@mlflow-host:5000")
