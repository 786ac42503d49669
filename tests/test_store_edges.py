"""The store at its edges, driven as a user meets them: a write-ahead log holding what a short main file lacks (a
checkpoint cut short by a full disk), a read-only store (a read-only bind mount as root, file modes as a non-root
user), a store MLflow cannot open at a sweep's start, and the spool imported from another directory. Real
`python -m ...` processes against real stores made by real sweeps."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forked_sweep
from tests.conftest import made_once
from tests.test_faults import _runs, made_store, one_line, open_dir, read_only_store, sweep  # noqa: F401 - fixtures


def _plain_copy(src: Path, dst_dir: Path) -> Path:
    """A copy of store `src` as SQLite leaves it when its last connection closes: the -wal checkpointed into the
    file, no -wal or -shm beside it (the file stays in WAL mode)."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{src}{suffix}").exists():
            shutil.copy(f"{src}{suffix}", dst_dir / f"mlflow.db{suffix}")
    conn = sqlite3.connect(dst_dir / "mlflow.db")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the first read recovers the -wal
    conn.close()  # the last connection: a checkpoint, then the -wal and -shm removed
    assert sorted(p.name for p in dst_dir.iterdir()) == ["mlflow.db"]
    return dst_dir / "mlflow.db"


def _make_wal_store(d: Path) -> None:
    uri = f"sqlite:///{d / 'st' / 'mlflow.db'}"
    env = {"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(d / "sp")}
    p = sweep("-m", "method=gf2", "problem.n_bits=10", "problem.seed=1,2", "mlflow.experiment=demo", env=env, cwd=d)
    assert p.returncode == 0, p.stderr
    db = d / "st" / "mlflow.db"
    assert (db.read_bytes()[18], db.read_bytes()[19]) == (2, 2)  # WAL mode


@pytest.fixture(scope="session")
def wal_store() -> Path:
    """A store made by a real two-job sweep (the launcher writes SQLite in WAL mode), study `demo`; made once for
    every worker (tests only copy it)."""
    return made_once("wal-store", _make_wal_store) / "st" / "mlflow.db"


def test_a_sweep_leaves_its_store_whole_in_its_one_file(wal_store, tmp_path):
    """Issue 35's kept -wal (beside case 2). The sweep wrote in WAL mode and ended: its -wal folded into mlflow.db,
    none left beside it (a sweep left a ~240 KB -wal, and a user who copied only mlflow.db lost its last runs). A
    copy of the file alone holds both jobs' runs and the parent with its totals."""
    assert sorted(p.name for p in wal_store.parent.iterdir() if p.name.startswith("mlflow.db")) == ["mlflow.db"]
    alone = tmp_path / "copy" / "mlflow.db"
    alone.parent.mkdir()
    shutil.copy(wal_store, alone)
    runs = _runs(f"sqlite:///{alone}")
    (parent,) = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    assert parent.info.status == "FINISHED" and parent.data.metrics["jobs_finished"] == 2
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.params["problem.seed"] for r in children if r.info.status == "FINISHED") == ["1", "2"]


# -- the -wal counts: a healthy store is not "corrupt: truncated" ------------------------------------------
WRITE_TO_WAL_ONLY = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("PRAGMA wal_autocheckpoint=0")  # nothing reaches the main file: every page written stays in the -wal
conn.execute("VACUUM")  # rewrites every page of the database
conn.execute("CREATE TABLE padding (x)")
conn.execute("INSERT INTO padding VALUES (zeroblob(200000))")
conn.commit()
os._exit(0)  # no close, so no checkpoint: the -wal stays, as after a crash or a full disk
"""


def test_spool_import_takes_a_store_whose_wal_holds_what_its_file_lacks(wal_store, made_store, open_dir, tmp_path):
    db = _plain_copy(wal_store, tmp_path / "st")
    uri = f"sqlite:///{db}"
    subprocess.run([sys.executable, "-c", WRITE_TO_WAL_ONLY, str(db)], check=True)
    wal = Path(f"{db}-wal")
    assert wal.stat().st_size > db.stat().st_size
    # a checkpoint cut short: the main file loses its tail, its header still counts the pages it had
    page_size = int.from_bytes(db.read_bytes()[16:18], "big")
    header_bytes = page_size * int.from_bytes(db.read_bytes()[28:32], "big")
    os.truncate(db, 2 * page_size)
    assert db.stat().st_size < header_bytes
    # SQLite reads it whole (checked in a process that leaves the -wal as it is)
    check = (
        f"import os, sqlite3; c = sqlite3.connect({str(db)!r}); "
        "print(c.execute('PRAGMA integrity_check').fetchone()[0]); os._exit(0)"
    )
    assert subprocess.run([sys.executable, "-c", check], capture_output=True, text=True).stdout.strip() == "ok"

    # a result spooled for this store (a single run, as nobody, on a store it could not write), then imported
    ro = read_only_store(made_store, open_dir)
    spool = open_dir / "spool"
    env = {"MLFLOW_TRACKING_URI": ro, "SWEEP_SPOOL_DIR": str(spool)}
    p = sweep("method=gf2", "problem.n_bits=10", "problem.seed=7", env=env, cwd=open_dir / "work", as_nobody=True)
    assert p.returncode == 1
    (spooled,) = spool.glob("*.json")
    spooled.write_text(spooled.read_text().replace(ro, uri))
    p = sweep("import", env={"SWEEP_SPOOL_DIR": str(spool)}, cwd=tmp_path, module="sweep.spool")
    assert p.returncode == 0, p.stderr
    assert "corrupt" not in p.stderr and f"1 result(s) written into {uri}" in p.stdout
    assert "7" in {r.data.params.get("problem.seed") for r in _runs(uri)}  # MLflow reads it, new run included


def test_a_truncated_store_whose_wal_lacks_the_pages_is_still_corrupt(wal_store, tmp_path):
    db = _plain_copy(wal_store, tmp_path / "st")
    subprocess.run([sys.executable, "-c", WRITE_TO_WAL_ONLY.replace('conn.execute("VACUUM")', ""), str(db)], check=True)
    os.truncate(db, db.stat().st_size // 2)  # the -wal holds the new table's pages, not the lost tail
    p = sweep("demo", "--no-log", "--tracking-uri", f"sqlite:///{db}", env={}, cwd=tmp_path, module="sweep.compare")
    assert p.returncode == 1 and "corrupt: truncated" in one_line(p.stderr)


# -- compare reads a read-only store -------------------------------------------------------------------------
@pytest.mark.parametrize("no_log", [False, True])
def test_compare_reads_a_store_on_a_read_only_mount(wal_store, tmp_path, no_log):
    """As root, where file modes bind nothing: the store's directory bind-mounted read-only."""
    db = _plain_copy(wal_store, tmp_path / "st")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "--bind", "-o", "ro", str(db.parent), str(mnt)], check=True)
    try:
        before = db.read_bytes()
        uri = f"sqlite:///{mnt / 'mlflow.db'}"
        args = ("demo", "--markdown", "--no-plot", "--out", str(tmp_path / "o"), "--tracking-uri", uri)
        p = sweep(*args, *(["--no-log"] if no_log else []), env={}, cwd=tmp_path, module="sweep.compare")
        assert p.returncode == 0, p.stderr
        assert "| 2/2 | 1.000" in p.stdout
        if no_log:
            assert p.stderr == ""
        else:
            line = one_line(p.stderr)
            assert "read-only" in line and "not logged" in line and "corrupt" not in line
        assert db.read_bytes() == before and sorted(x.name for x in mnt.iterdir()) == ["mlflow.db"]
        assert sorted(x.name for x in tmp_path.iterdir()) == ["mnt", "o", "st"]  # nothing made where it ran
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.fixture
def read_only_copy(wal_store):
    """(a directory every user enters, the URI of a copy of the store in it that user nobody cannot write); in
    the directory, `work/`, which nobody can write."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="sweep-ro-"))
    try:
        d.chmod(0o755)
        db = _plain_copy(wal_store, d / "st")
        (d / "work").mkdir(mode=0o777)
        (d / "work").chmod(0o777)
        db.chmod(0o444)
        db.parent.chmod(0o555)
        yield d, f"sqlite:///{db}"
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_compare_reads_a_read_only_store_as_a_non_root_user(read_only_copy):
    """File and directory without write permission, read by user nobody: never "corrupt"."""
    d, uri = read_only_copy
    args = ("demo", "--markdown", "--no-plot", "--out", str(d / "work" / "o"), "--tracking-uri", uri)
    p = sweep(*args, env={}, cwd=d / "work", as_nobody=True, module="sweep.compare")
    assert p.returncode == 0, p.stderr
    assert "| 2/2 | 1.000" in p.stdout
    line = one_line(p.stderr)
    assert "read-only" in line and "corrupt" not in line
    made = [x.name for x in (d / "work").iterdir() if not x.name.startswith(".")]  # HOME too: its caches aside
    assert made == ["o"]  # nothing made where it ran


# -- store errors at a sweep's start: one sweep: line, exit 1 --------------------------------------------------
@pytest.mark.parametrize("launcher", ["sweep", "basic"])
def test_a_store_mlflow_cannot_open_stops_a_sweep_with_one_line(tmp_path, launcher):
    """An SQLite file with MLflow's revision table naming a revision this MLflow does not know."""
    db = tmp_path / "mlflow.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    conn.execute("INSERT INTO alembic_version VALUES ('0123456789ab')")
    conn.commit()
    conn.close()
    uri = f"sqlite:///{db}"
    env = {"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(tmp_path / "sp")}
    p = sweep("-m", f"hydra/launcher={launcher}", "method=gf2,km", "problem.n_bits=10", env=env, cwd=tmp_path)
    assert p.returncode == 1
    assert "HYDRA_FULL_ERROR" not in p.stderr and "Traceback" not in p.stderr
    (line,) = [ln for ln in p.stderr.splitlines() if not ln.startswith("20")]  # MLflow's own dated INFO lines
    assert line.startswith(f"sweep: store {uri}: ") and "0123456789ab" in line
    assert "FINISHED" not in p.stdout  # no job ran


# -- the spool imports into the store each result names --------------------------------------------------------
def test_spool_import_writes_into_the_store_the_result_names_wherever_it_runs(made_store, open_dir):
    """A single run from directory `a` on a relative store URI that refuses it (a store nobody may write, the
    run as nobody: one that may take writes later), imported from directory `b`."""
    read_only_store(made_store, open_dir)  # open_dir/ro/mlflow.db; open_dir/spool and /work anyone may write
    a, b, spool = open_dir, open_dir / "work", open_dir / "spool"
    a.chmod(0o777)  # the run's own outputs are written where it runs
    env = {"MLFLOW_TRACKING_URI": "sqlite:///ro/mlflow.db", "SWEEP_SPOOL_DIR": str(spool)}
    p = sweep("method=gf2", "problem.n_bits=10", "problem.seed=9", env=env, cwd=a, as_nobody=True)
    assert p.returncode == 1 and "read-only" in one_line(p.stderr)
    (a / "ro").chmod(0o755)  # the store repaired: writable again
    (a / "ro" / "mlflow.db").chmod(0o644)
    p = sweep("import", env={"SWEEP_SPOOL_DIR": str(spool)}, cwd=b, module="sweep.spool")
    assert p.returncode == 0, p.stderr
    assert list(b.iterdir()) == []  # nothing made where the command ran
    assert "9" in [r.data.params.get("problem.seed") for r in _runs(f"sqlite:///{a / 'ro' / 'mlflow.db'}")]


def test_spool_import_with_nothing_spooled_creates_no_store(tmp_path):
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'st' / 'mlflow.db'}", "SWEEP_SPOOL_DIR": str(tmp_path / "sp")}
    (tmp_path / "cwd").mkdir()
    p = sweep("import", env=env, cwd=tmp_path / "cwd", module="sweep.spool")
    assert p.returncode == 0 and "nothing to import" in p.stdout, p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["cwd"] and list((tmp_path / "cwd").iterdir()) == []


def test_ui_serves_a_store_on_a_read_only_mount(wal_store, tmp_path):
    import json
    import signal
    import socket
    import urllib.request

    db = _plain_copy(wal_store, tmp_path / "st")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(["mount", "--bind", "-o", "ro", str(db.parent), str(mnt)], check=True)
    proc = None
    try:
        uri = f"sqlite:///{mnt / 'mlflow.db'}"
        argv = ["demo", "--port", str(port), "--tracking-uri", uri]
        proc = forked_sweep.popen(argv, tmp_path, forked_sweep.with_project(dict(os.environ)), "sweep.ui", session=True)
        line = forked_sweep.readline(proc)
        assert line.startswith("MLflow UI on"), (line, proc.communicate()[1] if proc.poll() is not None else "")
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/ajax-api/2.0/mlflow/runs/search",
            data=json.dumps({"experiment_ids": ["1"]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            runs = json.load(r)["runs"]
        assert sorted(r["info"]["run_name"] for r in runs if r["info"]["run_name"].startswith("seed=")) == [
            "seed=1",
            "seed=2",
        ]
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) in (0, 130)
        assert "read-only" in proc.communicate()[1] and sorted(x.name for x in tmp_path.iterdir()) == ["mnt", "st"]
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        subprocess.run(["umount", "--lazy", str(mnt)], check=True)  # lazy: a server's last file closes after


def test_spool_import_reads_only_its_own_spool_not_another_ones_results_in_the_last_resort(tmp_path, monkeypatch):
    """Case 9 of issue 35 (the import took other checkouts' results into their stores). The last resort
    (`sweep-unrecorded-<uid>` under $TMPDIR) is shared by every checkout and spool of a user:
    an import takes from it only the results its own spool could not take."""
    import tempfile

    from sweep.record import spool
    from sweep.result import RunResult

    last, blocked = tmp_path / "tmp", tmp_path / "blocked"
    last.mkdir()
    blocked.write_text("a file where the spool's directory should be: the spool cannot take the result")
    uri = f"sqlite:///{tmp_path / 'st' / 'mlflow.db'}"
    monkeypatch.setenv("SWEEP_SPOOL_DIR", str(blocked))
    monkeypatch.setattr(tempfile, "tempdir", str(last))
    where = spool.keep(RunResult(config={"problem": {"seed": 4}}, metrics={"accuracy": 1.0}), uri, "sweep", "full")
    (kept,) = (last / f"sweep-unrecorded-{os.getuid()}").glob("*.json")
    assert f"the result is kept in {kept}" in where
    (tmp_path / "cwd").mkdir()
    other = {"SWEEP_SPOOL_DIR": str(tmp_path / "other-spool"), "TMPDIR": str(last)}  # another checkout's spool
    p = sweep("import", env=other, cwd=tmp_path / "cwd", module="sweep.spool")
    assert p.returncode == 0 and "nothing to import" in p.stdout, (p.stdout, p.stderr)
    assert kept.exists() and not (tmp_path / "st").exists()
    p = sweep(
        "import", env={"SWEEP_SPOOL_DIR": str(blocked), "TMPDIR": str(last)}, cwd=tmp_path / "cwd", module="sweep.spool"
    )
    assert p.returncode == 0 and "1 result(s) written" in p.stdout, (p.stdout, p.stderr)
    assert not kept.exists() and [r.data.params["problem.seed"] for r in _runs(uri)] == ["4"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_compare_as_a_user_who_cannot_write_its_outputs_shows_the_table_and_claims_no_log(read_only_copy):
    """Case 9 of issue 35 (a 24-line PermissionError; "not logged" and "(logged to run ...)" both). Read-only
    store, and outputs/ not this user's: the table all the same, one line for what was not written,
    none claiming a log that was not made."""
    d, uri = read_only_copy
    (d / "outputs").mkdir(mode=0o755)  # root's: nobody cannot write in it

    def compare(out: Path):
        args = ("demo", "--no-plot", "--out", str(out), "--tracking-uri", uri)
        return sweep(*args, env={}, cwd=d / "work", as_nobody=True, module="sweep.compare")

    p = compare(d / "outputs" / "o")
    assert p.returncode == 1, p.stderr
    assert "demo: parent run" in p.stdout and "1.000" in p.stdout  # the table
    assert "logged to run" not in p.stdout and "wrote" not in p.stdout and "Traceback" not in p.stderr
    read_only, unwritten = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert "read-only" in read_only and "not logged" in read_only
    assert unwritten == (
        f"python -m sweep.compare: table and plot not written: {d / 'outputs' / 'o'}: Permission denied "
        "(--out DIR writes them elsewhere)"
    )
    p = compare(d / "work" / "o")
    assert p.returncode == 0, p.stderr
    assert f"wrote {d / 'work' / 'o' / 'table.csv'}" in p.stdout and "logged to run" not in p.stdout


def test_an_experiment_deleted_in_the_ui_is_one_line_before_any_job(store, tmp_path):
    """Issue 43, seventh round: after `exA` was deleted (MLflow's UI, `mlflow experiments delete`), a single run
    into it was recorded FINISHED there, hidden from the UI and from `sweep-compare exA` ("the store has no sweep
    yet"); a sweep ended with MLflow's "The experiment 1 must be in the 'active' state". Both are one line naming
    the experiment and the way back, before any job; nothing is written."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    eid = client.create_experiment("exA")
    client.delete_experiment(eid)
    said = (
        f"sweep: store {store}: experiment 'exA' (id {eid}) is deleted: restore it (MLflow's UI, or `mlflow "
        f"experiments restore --experiment-id {eid}`) or choose another mlflow.experiment"
    )
    for args in (("method=gf2",), ("-m", "method=gf2,km")):
        p = sweep(*args, "problem.n_bits=10", "mlflow.experiment=exA", env={}, cwd=tmp_path)
        assert p.returncode == 1 and one_line(p.stderr) == said and p.stdout == "", (p.stdout, p.stderr)
    assert _runs(store) == [] and client.search_runs([eid], run_view_type=3) == []
    assert not (tmp_path / "spool").exists()  # (nothing ran: no result kept aside)
