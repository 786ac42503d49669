"""The one-transaction run writer against MlflowClient: the same RunResult, written both ways into one real
SQLite store, must read back the same through MLflow's public API (a changed MLflow schema fails here)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from sweep.record.recorder import Recorder, config_hash
from sweep.record.sqlalchemy_writer import SqlRunWriter
from sweep.record.sqlite.writer import SqliteRunWriter
from sweep.record.tags import HASH_TAG
from sweep.result import RunResult


def result(status: str = "FINISHED", error: str | None = None) -> RunResult:
    return RunResult(
        config={
            "problem": {"name": "sparse_parity", "seed": 7, "n_bits": 20},
            "method": {"name": "sgd", "lr": 0.1},
            "extra": {"note": "x" * 7000},
        },  # a param longer than MLflow's limit is cut as the client cuts it
        metrics={"accuracy": 1.0, "epochs": 12.0, "nan_metric": float("nan"), "inf_metric": float("inf")},
        curves={"train_accuracy": [0.5, 0.75, 1.0], "ard_per_epoch": [3.0, 2.0, 2.5]},
        tags={"method": "sgd", "secret": "1,2,3"},
        artifacts={"config.yaml": "a: 1\n", "sub/outcome.json": "{}"},
        status=status,
        error=error,
        start_time=1_700_000_000.0,
    )


def recorder(uri: str, experiment: str, writer: str) -> Recorder:
    """A Recorder whose one-transaction writer is `writer`: "sqlalchemy" (MLflow's engine: what any SQL database
    but SQLite is written with) or "sqlite3" (a SQLite store, new or existing)."""
    rec = Recorder(uri, experiment)
    if writer == "sqlalchemy":
        rec.sql = SqlRunWriter.for_client(rec.client)
    assert type(rec.sql) is {"sqlalchemy": SqlRunWriter, "sqlite3": SqliteRunWriter}[writer]
    return rec


@pytest.mark.new_store
def test_a_recorder_that_creates_a_sqlite_store_writes_it_with_sqlite3(store):
    # MLflow makes the store's tables (the Recorder imports it for that); its runs then go in through sqlite3,
    # several times cheaper a run than SQLAlchemy: a sweep's first command into a new store is as fast as the next
    rec = Recorder(store, "fresh")
    assert type(rec.sql) is SqliteRunWriter
    rid = rec.log(result(), parent_run_id=rec.start_parent("p", {}))
    run = rec.client.get_run(rid)
    assert run.info.status == "FINISHED" and run.data.metrics["epochs"] == 12.0
    assert run.data.params["method.lr"] == "0.1"
    assert [f.path for f in rec.client.list_artifacts(rid, "sub")] == ["sub/outcome.json"]


def both(uri: str, res: RunResult, writer: str = "sqlalchemy"):
    rec = recorder(uri, "parity", writer)
    parent = rec.start_parent("p", {})
    fast = rec.log(res, parent_run_id=parent, extra_tags={"sweep.route": "local"})
    sql, rec.sql = rec.sql, None  # the same Recorder through MlflowClient
    slow = rec.log(res, parent_run_id=parent, extra_tags={"sweep.route": "local"})
    rec.sql = sql
    return rec.client, rec.client.get_run(fast), rec.client.get_run(slow)


WRITERS = ["sqlalchemy", "sqlite3"]


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("status", ["FINISHED", "FAILED", "KILLED"])
def test_sql_writer_reads_back_like_the_client(store, status, writer):
    client, a, b = both(store, result(status, error=None if status == "FINISHED" else "Traceback: boom\n"), writer)
    assert a.info.run_id != b.info.run_id
    for field in ("experiment_id", "status", "lifecycle_stage", "run_name", "user_id"):
        assert getattr(a.info, field) == getattr(b.info, field), field
    assert a.info.status == status and a.info.end_time is not None and a.info.end_time >= a.info.start_time
    assert a.info.start_time == b.info.start_time == 1_700_000_000_000  # the job's start, not the recording
    assert a.info.artifact_uri == b.info.artifact_uri.replace(b.info.run_id, a.info.run_id)
    assert a.data.params == b.data.params and len(a.data.params["extra.note"]) == 6000
    assert a.data.tags["sweep.params_truncated"] == "extra.note (7000 characters)"  # the cut is noted

    def norm(metrics):
        return {k: ("nan" if math.isnan(v) else v) for k, v in metrics.items()}

    assert norm(a.data.metrics) == norm(b.data.metrics)
    assert a.data.metrics["train_accuracy"] == 1.0 and a.data.metrics["ard_per_epoch"] == 2.5  # the last step
    assert a.data.metrics["inf_metric"] == b.data.metrics["inf_metric"] > 1e308
    drop = {"mlflow.runName"}
    assert {k: v for k, v in a.data.tags.items() if k not in drop} == {
        k: v for k, v in b.data.tags.items() if k not in drop
    }
    for key in ("train_accuracy", "ard_per_epoch", "accuracy"):
        ha = [(m.step, m.value) for m in client.get_metric_history(a.info.run_id, key)]
        hb = [(m.step, m.value) for m in client.get_metric_history(b.info.run_id, key)]
        assert sorted(ha) == sorted(hb)
    files = {f.path for f in client.list_artifacts(a.info.run_id)}
    assert files == {f.path for f in client.list_artifacts(b.info.run_id)}
    assert ("traceback.txt" in files) == (status != "FINISHED")
    assert client.download_artifacts(a.info.run_id, "sub/outcome.json")


def test_sql_written_runs_are_found_by_search(store):
    client, a, _ = both(store, result())
    exp = a.info.experiment_id
    hits = client.search_runs(
        [exp],
        filter_string="metrics.accuracy = 1.0 and params.`problem.seed` = '7' "
        "and tags.method = 'sgd' and attributes.status = 'FINISHED'",
    )
    assert a.info.run_id in {r.info.run_id for r in hits} and len(hits) == 2
    children = client.search_runs(
        [exp], filter_string=f"tags.`mlflow.parentRunId` = '{a.data.tags['mlflow.parentRunId']}'"
    )
    assert len(children) == 2


@pytest.mark.parametrize("writer", WRITERS)
def test_bad_metric_name_is_refused_before_anything_is_written(store, tmp_path, writer):
    rec = recorder(store, "bad", writer)
    bad = result()
    bad.metrics["bad name?"] = 1.0
    with pytest.raises(Exception, match="bad name"):
        rec.log(bad)
    assert rec.client.search_runs([rec.experiment_id]) == []
    artifacts = tmp_path / "mlruns" / "artifacts"
    assert not artifacts.exists() or not any(artifacts.iterdir()), "no orphan artifact files"


@pytest.mark.parametrize("writer", WRITERS)
def test_a_run_is_written_whole_or_not_at_all(store, writer):
    from sweep.record.sqlite.writer import new_run_id

    rec = recorder(store, "atomic", writer)
    dup = [("a", "1"), ("a", "2")]  # the params insert fails after the run row went in
    with pytest.raises(Exception):
        rec.sql.write(rec.experiment_id, new_run_id(), "r", "FINISHED", 1, 2, {"t": "v"}, dup, [("m", 1.0, 1, 0)])
    assert rec.client.search_runs([rec.experiment_id]) == []


def test_restated_mlflow_facts_match_the_installed_mlflow(store):
    """The sqlite3 writer restates MLflow's schema revision, limits, key rule and metric sanitising; an MLflow
    whose facts differ fails here (and its stores, at another revision, go through MLflow meanwhile)."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.environment_variables import MLFLOW_ARTIFACT_LOCATION_MAX_LENGTH
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.utils import validation as v

    from sweep.record.sqlite import writer as w
    from sweep.record.store import schema_version, sqlite_path

    Recorder(store, "facts")
    assert schema_version(sqlite_path(store)) == w.KNOWN_SCHEMA
    assert (w.MAX_KEY_LEN, w.MAX_PARAM_LEN, w.MAX_TAG_LEN, w.MAX_EXPERIMENT_TAG_LEN) == (
        v.MAX_ENTITY_KEY_LENGTH,
        v.MAX_PARAM_VAL_LENGTH,
        v.MAX_TAG_VAL_LENGTH,
        v.MAX_EXPERIMENT_TAG_VAL_LENGTH,
    )
    assert (w.MAX_EXPERIMENT_NAME_LEN, w.MAX_ARTIFACT_LOCATION_LEN) == (
        v.MAX_EXPERIMENT_NAME_LENGTH,
        MLFLOW_ARTIFACT_LOCATION_MAX_LENGTH.default,
    )
    assert MLFLOW_ARTIFACT_LOCATION_MAX_LENGTH.name == w.ARTIFACT_LOCATION_ENV
    assert w.ARTIFACTS_FOLDER == SqlAlchemyStore.ARTIFACTS_FOLDER_NAME
    for x in (1.5, float("inf"), float("-inf"), -0.0):
        assert w.sanitize(x) == SqlAlchemyStore.sanitize_metric_value(None, x)
    assert w.sanitize(float("nan"))[0] is True and SqlAlchemyStore.sanitize_metric_value(None, float("nan"))[0]
    # what the restated rule lets through, MLflow accepts
    for key in ("a", "method.lr", "a/b c:d-e_f", "x" * 250):
        assert w.plainly_valid({key: "v"}, [(key, "v")], [(key, 1.0, 0, 0)])
        v._validate_batch_log_data([Metric(key, 1.0, 0, 0)], [Param(key, "v")], [RunTag(key, "v")])
    for key in ("bad name?", "../up", "/abs", "a//b", "x" * 251, ""):
        assert not w.plainly_valid({key: "v"}, [], [])


def test_resume_without_mlflow_finds_what_mlflows_search_finds(store):
    # the sqlite3 resume query against MLflow's own search, on one store: a FINISHED run, a FAILED one, a deleted
    # one, and a config run twice (the newer run is the one found, as search's newest-first order gives it)
    rec = recorder(store, "resume", "sqlite3")
    configs = [{"problem": {"seed": s}} for s in range(5)]

    def run(i: int, status: str = "FINISHED", start: float = 1_700_000_000.0) -> str:
        return rec.log(RunResult(config=configs[i], metrics={"accuracy": 1.0}, status=status, start_time=start))

    run(0)
    run(1, "FAILED")
    rec.client.delete_run(run(2))
    run(3, start=1_700_000_000.0)
    newer = run(3, start=1_700_000_100.0)
    without_mlflow = rec.sql.finished(HASH_TAG, {config_hash(c) for c in configs})
    rec.sql = None  # the same query through MLflow's client
    assert without_mlflow == rec.finished(configs)
    assert set(without_mlflow) == {config_hash(configs[0]), config_hash(configs[3])}
    assert without_mlflow[config_hash(configs[3])] == newer


@pytest.mark.new_store
def test_a_single_run_into_an_existing_sqlite_store_imports_no_mlflow(store, tmp_path):
    # a repeat check reads the store too: it must not cost MLflow's seconds of imports (the direct writer's point)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import atexit, sys\n"
        "atexit.register(lambda: print('mlflow imported:', 'mlflow' in sys.modules, file=sys.stderr))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")])}

    def single(seed: int) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "sweep", "method=gf2", f"problem.seed={seed}", f"hydra.run.dir={tmp_path / 'o'}"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    first, second = single(1), single(2)
    # it made the store: in a process of its own (sweep.record.creation), so this one imports no MLflow either
    assert first.returncode == 0 and "mlflow imported: False" in first.stderr, first.stderr[-2000:]
    assert second.returncode == 0 and "mlflow imported: False" in second.stderr, second.stderr[-2000:]
    assert "[FINISHED]" in second.stdout
    assert "already recorded" in single(2).stdout  # and the repeat is still seen
