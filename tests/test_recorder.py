"""The MLflow recorder against a real SQLite store in a temporary directory."""

import pytest
from mlflow.tracking import MlflowClient

from sweep import job
from sweep.record.recorder import Recorder, config_hash, flatten, shared_recorder
from tests.conftest import compose


def test_flatten_gives_dotted_keys():
    assert flatten({"method": {"lr": 0.1, "x": {"y": 1}}, "a": None}) == {"method.lr": 0.1, "method.x.y": 1, "a": None}


@pytest.mark.new_store
def test_logs_params_metrics_curves_tags_artifacts(store, tmp_path):
    result = job.run(compose("method=sgd", "problem.seed=42"))
    rec = Recorder(store, "test-exp")
    rid = rec.log(result)
    c = MlflowClient(store)
    run = c.get_run(rid)
    assert run.info.status == "FINISHED"
    assert run.data.params["method.lr"] == "0.1" and run.data.params["problem.n_bits"] == "20"
    assert run.data.params["tracker.name"] == "ard"
    for m in ("accuracy", "train_accuracy", "epochs", "wall_clock_s", "ard", "total_floats", "cost_usd"):
        assert m in run.data.metrics, m
    assert run.data.metrics["accuracy"] == 1.0
    for t in ("problem", "method", "variant", "device", "tracker", "git_commit"):
        assert t in run.data.tags, t
    hist = c.get_metric_history(rid, "test_accuracy")
    assert [h.step for h in hist] == list(range(1, int(result.metrics["epochs"]) + 1))
    arts = {a.path for a in c.list_artifacts(rid)}
    assert {"config.yaml", "tracker_buffers.csv"} <= arts
    table = c.download_artifacts(rid, "tracker_buffers.csv", str(tmp_path))
    assert "W1" in open(table).read()


@pytest.mark.new_store
def test_a_process_shares_one_recorder_per_store_and_experiment(store):
    """Hydra's basic launcher: each job's resume check and its recording use the store opened once."""
    rec = shared_recorder(store, "shared")
    assert shared_recorder(store, "shared") is rec and shared_recorder(store, "other") is not rec


@pytest.mark.new_store
def test_parent_child_and_resume_lookup(store):
    rec = Recorder(store, "sweep-exp")
    parent = rec.start_parent("sweep test", {"sweep.overrides": "method=gf2,km"})
    results = [job.run(compose(f"method={m}")) for m in ("gf2", "km")]
    ids = [rec.log(r, parent_run_id=parent) for r in results]
    rec.end_parent(parent, "FINISHED", results)
    c = MlflowClient(store)
    assert all(c.get_run(i).data.tags["mlflow.parentRunId"] == parent for i in ids)
    p = c.get_run(parent)
    assert p.data.metrics["cost_usd"] > 0 and p.data.metrics["jobs_finished"] == 2
    assert rec.finished_run(results[0].config) == ids[0]
    other = dict(results[0].config, problem={**results[0].config["problem"], "seed": 1})
    assert config_hash(other) != config_hash(results[0].config) and rec.finished_run(other) is None


def test_a_run_the_store_made_before_refusing_the_rest_is_deleted_when_its_result_is_imported(store):
    # a tracking server killed between a run's creation and its metrics: the result was spooled and imported as a
    # new run, and the one made first stayed RUNNING for good (a re-run of the sweep did not repair it). Here the
    # same through MLflow's client on SQLite: its files' folder is a file, so the run is made and its files fail
    import shutil
    from pathlib import Path

    from sweep.record import spool
    from sweep.record.store import StoreError

    rec = Recorder(store, "half")
    rec.sql = None  # MLflow's client writes it, as it writes a tracking server's runs
    result = job.run(compose("method=gf2", "problem.n_bits=12"))
    root = Path(store[len("sqlite:///") :]).parent / "artifacts"  # the runs' files: <root>/<run id>/artifacts
    shutil.rmtree(root, ignore_errors=True)
    root.write_text("not a folder")
    with pytest.raises(StoreError, match="the result is kept in"):
        rec.log(result)
    client = MlflowClient(store)
    assert [r.info.status for r in client.search_runs([rec.experiment_id])] == ["RUNNING"]
    root.unlink()
    assert spool.import_into(rec) == 1
    assert [r.info.status for r in client.search_runs([rec.experiment_id])] == ["FINISHED"]


def test_a_database_error_is_said_once_not_logged_with_its_traceback(store):
    """Task fault11 of issue 43: PostgreSQL restarted mid-sweep (`pg_ctl restart -m fast`) stopped the sweep with its
    one line and the result spooled, after MLflow's SQL store had logged 6 tracebacks (246 lines of output; 10
    now). The same here through MLflow's client on SQLite, in a process of its own (MLflow's log handler writes to
    the stderr it found), its writes refused by `ulimit -f` (whose line was SQLAlchemy's autoflush note, not the
    error: `(raised as a result of Query-invoked autoflush; consider using ...`)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import resource\nfrom sweep import job\nfrom sweep.record.recorder import Recorder\n"
        "from sweep.record.store import StoreError\nfrom tests.conftest import compose\n"
        f"rec = Recorder({store!r}, 'limited')\nrec.sql = None\n"  # MLflow's client writes, as a database's runs
        "rec.client.get_experiment(rec.experiment_id)\n"  # the store open in MLflow already, as mid-sweep
        "result = job.run(compose('method=gf2', 'problem.n_bits=12'))\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (512, resource.RLIM_INFINITY))  # ulimit -f: no file past 512 B\n"
        "try:\n    rec.log(result)\nexcept StoreError as e:\n    print(e)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    said = p.stdout.splitlines()[-1]  # (before it, the result as one line of JSON: the spool's files are refused too)
    assert said.startswith(f"store {store}: (sqlite3.OperationalError) disk I/O error; "), p.stdout[-2000:] + p.stderr
    assert "Traceback" not in p.stderr and "SQLAlchemy database error" not in p.stderr, p.stderr
