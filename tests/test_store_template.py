"""A new SQLite store is MLflow's first one copied (sweep.record.sqlite.template): the same tables and rows as the
store MLflow's migrations made, its Default experiment as MLflow would make it there, at the head revision as
alembic reads MLflow's migrations, and opened, written and read by MLflow's own client with nothing to migrate."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sweep.record import creation, store
from sweep.record.sqlite import template


def _dump(db: Path) -> tuple[list, dict[str, list]]:
    """The schema (SQLite's own text of each table, index, trigger) and every table's rows."""
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        schema = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
        tables = [n for t, n, _, _ in schema if t == "table"]
        return schema, {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}
    finally:
        conn.close()


def _make(uri: str) -> None:
    with creation.creation_lock(uri):
        creation.create(uri)


def test_a_new_store_is_the_template_copied_and_mlflow_takes_it_as_its_own(tmp_path, monkeypatch):
    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _all_tables_exist, _get_alembic_config
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path / "cache"))
    assert template.usable() is None
    first, second = (f"sqlite:///{tmp_path / d / 'mlflow.db'}" for d in ("a", "b"))
    _make(first)  # MLflow's migrations, in a child process; kept as the template
    kept = template.usable()
    assert kept is not None and kept.parent == tmp_path / "cache" and "mlflow-" in kept.name

    def no_migrations(*args: object) -> None:
        raise AssertionError("the second store was made by MLflow's migrations, not copied")

    monkeypatch.setattr(creation, "_make", no_migrations)
    _make(second)
    made = store.sqlite_path(second)
    assert made is not None and made.exists()
    assert [p.name for p in made.parent.iterdir() if ".creating-" in p.name] == []

    (schema_a, rows_a), (schema_b, rows_b) = _dump(store.sqlite_path(first)), _dump(made)
    assert schema_b == schema_a  # the same tables, indexes and their SQL
    default_a, default_b = rows_a.pop("experiments"), rows_b.pop("experiments")
    assert rows_b == rows_a  # alembic_version, workspaces: the same rows; the rest empty
    assert len(default_b) == 1 and default_b[0][:2] == (0, "Default")
    head = ScriptDirectory.from_config(_get_alembic_config("")).get_current_head()
    assert rows_b["alembic_version"] == [(head,)]

    root = store.artifact_location(second)
    mlflow_store = SqlAlchemyStore(second, root)  # verifies the revision (raises on any other); migrates nothing
    assert _all_tables_exist(mlflow_store.engine)
    expected = mlflow_store._get_artifact_location(0)  # what MLflow writes for Default in a store made here
    mlflow_store.engine.dispose()
    assert default_b[0][2] == expected != default_a[0][2]
    assert default_b[0][3:] == (default_a[0][3], default_b[0][4], default_b[0][4], default_a[0][6])

    client = MlflowClient(tracking_uri=second)
    assert client.get_experiment("0").artifact_location == expected
    exp = client.create_experiment("e", artifact_location=root)
    run = client.create_run(exp, run_name="r").info.run_id
    client.log_metric(run, "m", 1.5, step=2)
    client.set_terminated(run)
    [found] = client.search_runs([exp])
    assert (found.info.run_id, found.data.metrics, found.info.status) == (run, {"m": 1.5}, "FINISHED")


@pytest.mark.parametrize("damage", ["runs", "garbage"])
def test_a_template_that_is_not_an_empty_store_at_the_head_is_not_used(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path / "cache"))
    path = template.template_path()
    path.parent.mkdir(parents=True)
    if damage == "garbage":
        path.write_bytes(b"not a database")
    else:  # a store with a run in it: never a new store's template
        conn = sqlite3.connect(path)
        conn.executescript(
            "CREATE TABLE alembic_version (version_num TEXT); CREATE TABLE experiments (experiment_id INTEGER);"
            "CREATE TABLE runs (run_uuid TEXT);"
            f"INSERT INTO alembic_version VALUES ('{template.mlflow_head()[0]}'); INSERT INTO runs VALUES ('x');"
        )
        conn.close()
    assert template.usable() is None
    assert not path.exists()  # removed: the next store MLflow makes is kept in its place
