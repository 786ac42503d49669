"""The store check tells apart what can be wrong with a store, each in its own one line within seconds: full
(a real tmpfs filled to the last byte), locked (another process holding SQLite's lock), another schema revision
(older or newer than this MLflow's), half-made (a creation an older version never finished), not an MLflow store;
only true corruption says "corrupt" (tests/test_faults.py and tests/test_store_edges.py hold those, and the
read-only stores). Real `python -m ...` processes against real stores."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.disks import fill, tmpfs
from tests.forked_sweep import Forked, popen, with_project
from tests.test_faults import _runs, made_store, no_process_left, one_line, sweep  # noqa: F401 - made_store: a fixture

GRID = ("-m", "method=gf2", "problem.n_bits=10", "problem.seed=1,2")


def _sweep_line(uri: str, tmp_path: Path, launcher: str = "sweep") -> str:
    """A sweep on `uri` that must stop before any job: its one line, within a minute (MLflow alone: minutes)."""
    env = {"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    t0 = time.monotonic()
    p = sweep(*GRID, f"hydra/launcher={launcher}", env=env, cwd=tmp_path)
    assert time.monotonic() - t0 < 60
    assert p.returncode == 1 and "FINISHED" not in p.stdout, (p.stdout, p.stderr)
    line = one_line(p.stderr)
    assert line.startswith(f"sweep: store {uri}: ")
    return line[len(f"sweep: store {uri}: ") :]


def _compare_line(uri: str, tmp_path: Path, started: Forked | subprocess.Popen | None = None) -> str:
    """`sweep.compare` on `uri`'s one line (of the command `started` if given, else run here)."""
    if started is None:
        p = sweep("sweep", "--no-log", "--tracking-uri", uri, env={}, cwd=tmp_path, module="sweep.compare")
    else:
        out, err = started.communicate(timeout=300)
        p = subprocess.CompletedProcess(started.args, started.returncode, out, err)
        no_process_left(started.pid)
    assert p.returncode == 1
    line = one_line(p.stderr)
    assert f"store {uri}: " in line
    return line.split(f"store {uri}: ", 1)[1]


def _copy(made_store: Path, d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(made_store, d / "mlflow.db")
    return d / "mlflow.db"


def _empty_store(d: Path) -> Path:
    """A whole store with no runs, as MLflow's own client makes it."""
    d.mkdir(parents=True, exist_ok=True)
    make = "import sys; from mlflow.tracking import MlflowClient; MlflowClient(sys.argv[1]).search_experiments()"
    subprocess.run([sys.executable, "-c", make, f"sqlite:///{d / 'mlflow.db'}"], check=True, capture_output=True)
    return d / "mlflow.db"


def _sql(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db)
    for s in statements:
        conn.execute(s)
    conn.commit()
    conn.close()


def mlflow_head() -> str:
    """This MLflow's schema head, as alembic reads MLflow's migration scripts."""
    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _get_alembic_config

    return ScriptDirectory.from_config(_get_alembic_config("")).get_current_head()


def _older_revision() -> str:
    """The revision just before this MLflow's head."""
    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _get_alembic_config

    return ScriptDirectory.from_config(_get_alembic_config("")).get_revision(mlflow_head()).down_revision


# -- full ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("launcher", ["sweep", "basic"])
def test_a_store_on_a_full_disk_is_called_full(made_store, tmp_path, launcher):
    with tmpfs(tmp_path / "disk", "4m") as disk:
        db = _copy(made_store, disk / "st")
        fill(disk)
        cause = _sweep_line(f"sqlite:///{db}", tmp_path, launcher)
        assert cause.startswith(f"full: no room left on the disk that holds {db.parent}") and "corrupt" not in cause


# -- locked --------------------------------------------------------------------------------------------------
HOLD = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN " + sys.argv[2])
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("journal,lock", [("delete", "EXCLUSIVE"), ("wal", "IMMEDIATE")])
def test_a_store_another_process_holds_is_called_locked(made_store, tmp_path, journal, lock):
    """A rollback-journal store under an exclusive lock (no one reads it), a WAL store under a write lock."""
    db = _copy(made_store, tmp_path / "st")
    _sql(db, f"PRAGMA journal_mode={journal}")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db), lock], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        uri = f"sqlite:///{db}"
        compare = None
        if lock == "EXCLUSIVE":  # readers wait too: the compare waits out its lock beside the sweep
            argv = ["sweep", "--no-log", "--tracking-uri", uri]
            compare = popen(argv, tmp_path, with_project(dict(os.environ)), module="sweep.compare", session=True)
        cause = _sweep_line(uri, tmp_path)
        assert cause.startswith("locked: another process holds it") and "corrupt" not in cause
        if compare is not None:
            assert _compare_line(uri, tmp_path, compare).startswith("locked: ")
    finally:
        holder.kill()
        holder.wait()


# -- schema revisions ----------------------------------------------------------------------------------------
def test_a_store_at_an_older_schema_revision_says_so_and_how_to_upgrade(made_store, tmp_path):
    db = _copy(made_store, tmp_path / "st")
    older = _older_revision()
    # beside its one run, a deleted run and the claims' bookkeeping run (sweep.record.claims): a user has 1 run
    copy = "INSERT INTO runs SELECT {}, name, source_type, source_name, entry_point_name, user_id, status, " + (
        "start_time, end_time, source_version, {}, artifact_uri, experiment_id, deleted_time FROM runs LIMIT 1"
    )
    _sql(
        db,
        f"UPDATE alembic_version SET version_num = '{older}'",
        copy.format("'yy' || run_uuid", "'deleted'"),
        copy.format("'zz' || run_uuid", "lifecycle_stage"),
        "INSERT INTO tags SELECT 'sweep.claims', 'true', run_uuid FROM runs WHERE run_uuid LIKE 'zz%'",
    )
    uri = f"sqlite:///{db}"
    cause = _sweep_line(uri, tmp_path)
    assert cause.startswith(f"an older schema revision ({older}; this MLflow writes {mlflow_head()}; it holds 1 run")
    assert f"`mlflow db upgrade {uri}`" in cause
    assert _compare_line(uri, tmp_path).startswith("an older schema revision")


def test_a_store_at_a_revision_this_mlflow_does_not_know_says_a_newer_mlflow_made_it(made_store, tmp_path):
    db = _copy(made_store, tmp_path / "st")
    _sql(db, "UPDATE alembic_version SET version_num = 'ffff00001111'")
    cause = _sweep_line(f"sqlite:///{db}", tmp_path)
    assert cause.startswith("a schema revision this MLflow does not know (ffff00001111;") and "newer MLflow" in cause
    # a single run too, before its job: it ran, then spooled a result this store will never take
    uri = f"sqlite:///{db}"
    p = sweep(
        "method=gf2", "problem.n_bits=10", env={"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": "sp"}, cwd=tmp_path
    )
    assert p.returncode == 1 and "FINISHED" not in p.stdout and not (tmp_path / "sp").exists(), p.stdout
    assert one_line(p.stderr) == f"sweep: store {uri}: {cause}"


# -- half-made -----------------------------------------------------------------------------------------------
def _half_made(db: Path) -> None:
    """What a signal during an older version's in-place creation left: a migration's temporary table, the
    revision short of the head."""
    _sql(
        db,
        f"UPDATE alembic_version SET version_num = '{_older_revision()}'",
        "CREATE TABLE _alembic_tmp_jobs (id VARCHAR(36) NOT NULL)",
    )


def test_a_half_made_store_is_called_so_and_removing_it_as_told_lets_the_sweep_run(tmp_path):
    db = _empty_store(tmp_path / "st")
    _half_made(db)
    uri = f"sqlite:///{db}"
    cause = _sweep_line(uri, tmp_path)
    assert cause.startswith("half-made: its creation was never finished") and "alembic's half-done table" in cause
    assert "it holds no runs: remove it" in cause and "corrupt" not in cause
    for f in tmp_path.glob("st/mlflow.db*"):  # as the line says
        f.unlink()
    env = {"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    assert sweep(*GRID, env=env, cwd=tmp_path).returncode == 0
    assert len([r for r in _runs(uri) if r.info.status == "FINISHED"]) == 3  # the parent and its two jobs


def test_an_empty_file_is_a_half_made_store_not_a_corrupt_one(tmp_path):
    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "mlflow.db").touch()
    cause = _sweep_line(f"sqlite:///{tmp_path / 'st' / 'mlflow.db'}", tmp_path)
    assert cause.startswith("half-made: an empty file") and "it holds no runs: remove it" in cause


def test_a_cut_short_upgrade_of_a_store_with_runs_is_never_called_removable(made_store, tmp_path):
    db = _copy(made_store, tmp_path / "st")
    _half_made(db)
    cause = _sweep_line(f"sqlite:///{db}", tmp_path)
    assert cause.startswith("a schema upgrade was cut short") and "it holds 1 run(s)" in cause
    assert "remove" not in cause and "half-made" not in cause


# -- not an MLflow store -------------------------------------------------------------------------------------
def test_another_applications_database_is_not_an_mlflow_store_nor_corrupt(tmp_path):
    (tmp_path / "st").mkdir()
    db = tmp_path / "st" / "mlflow.db"
    _sql(db, "CREATE TABLE notes (x)")
    uri = f"sqlite:///{db}"
    assert _sweep_line(uri, tmp_path) == "not an MLflow store (an SQLite database with the tables notes)"
    assert _compare_line(uri, tmp_path) == "not an MLflow store (an SQLite database with the tables notes)"


def test_another_applications_database_with_a_runs_table_is_never_called_half_made():
    """A prober's round: another application's database with a (empty) `runs` table of its own, or its own
    alembic revision, was "half-made: its creation was never finished ...; it holds no runs: remove it" (after the
    job had run): advice to delete someone else's data. Read without a process: schema_problem's line."""
    from sweep.record.sqlite.schema import schema_problem  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as d:
        cases = {
            "a.db": ("CREATE TABLE runs (x)", "CREATE TABLE notes (y)"),
            "b.db": (
                "CREATE TABLE alembic_version (version_num)",
                "INSERT INTO alembic_version VALUES ('abc123')",
                "CREATE TABLE experiments (x)",
                "CREATE TABLE users (y)",
            ),
            "c.db": ("CREATE TABLE experiments (x)",),
        }
        for name, statements in cases.items():
            _sql(Path(d) / name, *statements)
            cause = schema_problem(Path(d) / name)
            assert cause is not None and cause.startswith("not an MLflow store (an SQLite database with the tables ")
            assert "remove" not in cause and "half-made" not in cause and "newer MLflow" not in cause
