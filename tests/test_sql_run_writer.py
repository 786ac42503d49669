"""The one-transaction run writer against MlflowClient: the same RunResult, written both ways into one real
SQLite store, must read back the same through MLflow's public API (a changed MLflow schema fails here)."""

from __future__ import annotations

import math

import pytest

from sweep.record.recorder import Recorder
from sweep.record.sql_writer import SqliteRunWriter, SqlRunWriter
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
    """A Recorder whose one-transaction writer is `writer`: "sqlalchemy" (MLflow's engine: the Recorder that
    creates the store) or "sqlite3" (no MLflow import: a Recorder opened on the existing store)."""
    rec = Recorder(uri, experiment)
    if writer == "sqlite3":
        rec = Recorder(uri, experiment)
    assert type(rec.sql) is {"sqlalchemy": SqlRunWriter, "sqlite3": SqliteRunWriter}[writer]
    return rec


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
    from sweep.record.sql_writer import new_run_id

    rec = recorder(store, "atomic", writer)
    dup = [("a", "1"), ("a", "2")]  # the params insert fails after the run row went in
    with pytest.raises(Exception):
        rec.sql.write(rec.experiment_id, new_run_id(), "r", "FINISHED", 1, 2, {"t": "v"}, dup, [("m", 1.0, 1, 0)])
    assert rec.client.search_runs([rec.experiment_id]) == []


def test_restated_mlflow_facts_match_the_installed_mlflow(store):
    """The sqlite3 writer restates MLflow's schema revision, limits, key rule and metric sanitising; an MLflow
    whose facts differ fails here (and its stores, at another revision, go through MLflow meanwhile)."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.utils import validation as v

    from sweep.record import sql_writer as w
    from sweep.record.store import schema_version, sqlite_path

    Recorder(store, "facts")
    assert schema_version(sqlite_path(store)) == w.KNOWN_SCHEMA
    assert (w.MAX_KEY_LEN, w.MAX_PARAM_LEN, w.MAX_TAG_LEN) == (
        v.MAX_ENTITY_KEY_LENGTH,
        v.MAX_PARAM_VAL_LENGTH,
        v.MAX_TAG_VAL_LENGTH,
    )
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
