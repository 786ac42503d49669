"""A sweep's parent run and its last line through sqlite3 (`SqliteRunWriter`, `SqliteClient`) against the same
through MLflow's client: one sweep recorded both ways into two real SQLite stores must read back the same through
MlflowClient (the parent's info, tags, params, metrics; the experiment's tags), and a sweep into an existing
store must not import MLflow at all."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from sweep import job
from sweep.record.recorder import Recorder
from sweep.record.sqlalchemy_writer import SqlRunWriter
from sweep.record.sqlite.client import SqliteClient
from sweep.record.sqlite.writer import SqliteRunWriter
from sweep.report import ui
from tests.conftest import compose, run_sweep

STUDY = {"sweep.overrides": "sweeps=both", "launcher": "basic"}
EXTRA = {"sweep_wall_s": 1.5, "launcher_cpu_s": 0.25, "jobs_skipped": 0.0}


def record(uri: str, results: list, again, through_mlflow: bool) -> tuple[Recorder, list[str]]:
    """test_ui's story of a study: a sweep, a re-run with every job done (no children), a resume re-running
    a FAILED job; the last line written after each. Returns the recorder and the parents' ids."""
    if not through_mlflow:  # an existing store: its new experiment made through sqlite3 too
        Recorder(uri, "other")
    rec = Recorder(uri, "both")
    if through_mlflow:
        rec.sql = SqlRunWriter.for_client(rec.client)
    assert isinstance(rec.store_client, MlflowClient if through_mlflow else SqliteClient)
    parents = []
    for children, status in ((results, "FINISHED"), ([], "FINISHED"), ([again], "FAILED")):
        if again in children:
            rec.store_client.set_terminated(results[0].run_id, "FAILED")
        parent = rec.start_parent("sweep sweeps=both", STUDY, {"launcher.n_workers": 2, "launcher.batch": 1})
        parents.append(parent)
        for r in children:
            rec.log(r, parent_run_id=parent)
        rec.end_parent(parent, status, children, EXTRA)
        ui.next_steps(rec.store_client, uri, rec.experiment_id, parent)
    return rec, parents


def snapshot(uri: str, rec: Recorder, parents: list[str]) -> dict:
    """What MLflow's own client reads back, with each run id replaced by a name that is the same in both stores."""
    client = MlflowClient(uri)
    names = {p: f"parent{i}" for i, p in enumerate(parents)}
    for r in client.search_runs([rec.experiment_id]):
        names.setdefault(r.info.run_id, f"{r.info.run_name}/{r.info.status}")

    def plain(text: str) -> str:
        for rid, name in names.items():
            text = text.replace(rid, name)
        return text

    exp = client.get_experiment(rec.experiment_id)
    assert exp.artifact_location == Path(uri[len("sqlite:///") :]).with_name("artifacts").as_uri()
    out: dict = {
        "experiment": {k: plain(v) for k, v in exp.tags.items()},
        "experiment info": (exp.name, exp.lifecycle_stage, exp.creation_time == exp.last_update_time),
    }
    for p in parents:
        run = client.get_run(p)
        i = run.info
        assert i.end_time >= i.start_time and i.artifact_uri.endswith(f"/{p}/artifacts")
        out[names[p]] = {
            "info": (i.status, i.run_name, i.user_id, i.lifecycle_stage),
            "tags": run.data.tags,
            "params": run.data.params,
            "metrics": run.data.metrics,
            "history": [(m.key, m.value, m.step) for m in client.get_metric_history(p, "jobs_finished")],
        }
    return out


def test_a_parent_run_and_last_line_through_sqlite3_read_back_as_mlflows(tmp_path):
    results = [job.run(compose(f"method={m}", "problem.seed=42", "problem.n_bits=10")) for m in ("gf2", "km")]
    again = job.run(compose("method=gf2", "problem.seed=42", "problem.n_bits=10"))
    fast_uri, slow_uri = (f"sqlite:///{tmp_path / name / 'mlflow.db'}" for name in ("fast", "slow"))
    slow = snapshot(slow_uri, *record(slow_uri, results, again, through_mlflow=True))
    fast = snapshot(fast_uri, *record(fast_uri, results, again, through_mlflow=False))
    assert fast == slow
    view = json.loads(fast["experiment"][ui.VIEW_TAG_PREFIX + ui.VIEW_KEY])
    assert view["searchFilter"].startswith("attributes.run_id IN (")  # the resumed sweep, listed whole
    assert fast["parent0"]["metrics"]["jobs_finished"] == 2.0 and fast["parent2"]["info"][0] == "FAILED"


def test_sqlite_client_searches_as_mlflow_does(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rec = Recorder(uri, "search")
    parent = rec.start_parent("sweep x", STUDY)
    for seed in range(5):
        r = job.run(compose("method=gf2", f"problem.seed={seed}", "problem.n_bits=10"))
        r.start_time = 1_700_000_000.0 + seed // 2  # ties in start time: the id orders them, as MLflow's does
        rec.log(r, parent_run_id=parent)
    mine, theirs = SqliteClient(rec.sql), MlflowClient(uri)

    def seen(page) -> list:
        return [
            (r.info.run_id, r.info.status, r.info.run_name, r.data.tags, r.data.params, r.data.metrics) for r in page
        ]

    for filt in (
        "",
        f"tags.`mlflow.parentRunId` = '{parent}'",
        "attributes.status = 'RUNNING' and tags.`sweep.parent` = 'true'",
    ):
        assert seen(mine.search_runs([rec.experiment_id], filt)) == seen(theirs.search_runs([rec.experiment_id], filt))
    first = mine.search_runs([rec.experiment_id], "", max_results=2)
    rest = mine.search_runs([rec.experiment_id], "", max_results=10, page_token=first.token)
    assert first.token is not None and rest.token is None
    assert seen([*first, *rest]) == seen(theirs.search_runs([rec.experiment_id]))
    assert mine.get_experiment(rec.experiment_id).tags == theirs.get_experiment(rec.experiment_id).tags
    assert [e.name for e in mine.search_experiments()] == sorted(e.name for e in theirs.search_experiments())


def sweep(tmp_path: Path, n_bits: int) -> tuple[str, ...]:
    """A two-job sweep's command line; another `n_bits`, other jobs (none skipped as done)."""
    return (
        "-m",
        "method=gf2",
        "problem.seed=0,1",
        f"problem.n_bits={n_bits}",
        "tracker=none",
        f"hydra.sweep.dir={tmp_path / 'o'}",
    )


@pytest.mark.new_store
def test_a_sweep_into_an_existing_sqlite_store_imports_no_mlflow(store, tmp_path):
    # the parent run, resume, every child run and the last line: all through sqlite3 once the store exists
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import atexit, sys\n"
        "atexit.register(lambda: print('mlflow imported:', 'mlflow' in sys.modules, file=sys.stderr))\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")])}
    first = run_sweep(*sweep(tmp_path, 10), cwd=tmp_path, env=env)
    # it made the store: in a process of its own (sweep.record.creation), so this one imports no MLflow either
    assert first.returncode == 0 and "mlflow imported: False" in first.stderr, first.stderr[-2000:]
    assert Path(store[len("sqlite:///") :]).exists()
    second = run_sweep(*sweep(tmp_path, 11), cwd=tmp_path, env=env)
    assert second.returncode == 0 and "mlflow imported: False" in second.stderr, second.stderr[-2000:]
    assert "next: " in second.stdout, second.stdout[-2000:]
    client = MlflowClient(store)
    parents = client.search_runs(client.get_experiment_by_name("sweep").experiment_id, "tags.`sweep.parent` = 'true'")
    assert [p.info.status for p in parents] == ["FINISHED", "FINISHED"]
    assert parents[0].data.metrics["jobs_finished"] == 2.0
    children = f"tags.`mlflow.parentRunId` = '{parents[0].info.run_id}'"
    assert len(client.search_runs([parents[0].info.experiment_id], children)) == 2


def test_a_parent_run_the_store_refuses_fails_in_one_line_before_any_job(store, tmp_path):
    # the store opens and checks fine, but refuses the parent's row: one line, exit 1, no job run
    assert run_sweep(*sweep(tmp_path, 10), cwd=tmp_path).returncode == 0
    path = store[len("sqlite:///") :]
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'no room for runs'); END")
    assert SqliteRunWriter.open(Path(path), "sweep") is not None  # the sqlite3 path is taken
    out = run_sweep(*sweep(tmp_path, 11), cwd=tmp_path)
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("sweep:")]
    assert out.returncode == 1 and len(lines) == 1 and store in lines[0], out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "[FINISHED]" not in out.stdout
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (3,)
