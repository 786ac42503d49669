"""A finished result that neither the store nor the spool can take (one full disk holds both, as in the default
layout) is never lost silently: the command exits 1 with one line naming the store, the spool and the causes,
and the result is in the last resort (a directory under $TMPDIR) or, when even that fails, printed; from either,
`python -m sweep.spool import` writes it in. Real processes on a real tmpfs filled to the last byte."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest

from sweep.record import spool
from sweep.record.tags import CLAIM_TAG
from sweep.result import RunResult
from tests import forked_sweep
from tests.disks import fill, tmpfs
from tests.test_faults import _runs, made_store, no_process_left, one_line, sweep  # noqa: F401 - made_store: a fixture

# a job that takes seconds (it never learns at this rate), so the disk can fill while it runs
SLOW_JOB = ("method=sgd", "problem.n_bits=40", "method.max_epochs=800", "method.lr=1e-9", "tracker=none")


def _leftovers(d: Path) -> list[str]:
    """Partial or temporary files in a directory (a spool's `.tmp`, a 0-byte file)."""
    return [p.name for p in d.rglob("*") if p.is_file() and (".tmp" in p.name or p.stat().st_size == 0)]


def _import(env: dict, cwd: Path, *files: str) -> None:
    p = sweep("import", *files, env=env, cwd=cwd, module="sweep.spool")
    assert p.returncode == 0, p.stderr
    assert "result(s) written" in p.stdout


def test_a_single_run_on_a_full_disk_keeps_its_result_in_the_last_resort(made_store, tmp_path):
    with tmpfs(tmp_path / "disk", "4m") as disk:
        (disk / "st").mkdir()
        (disk / "st" / "mlflow.db").write_bytes(made_store.read_bytes())
        uri = f"sqlite:///{disk / 'st' / 'mlflow.db'}"
        spool_dir, last = disk / "spool", tmp_path / "tmp"
        last.mkdir()
        env = {"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(spool_dir), "TMPDIR": str(last)}
        filler = fill(disk)
        p = sweep("method=gf2", "problem.n_bits=10", "problem.seed=3", env=env, cwd=tmp_path)
        assert p.returncode == 1, p.stderr
        line = one_line(p.stderr)
        assert line.startswith(f"sweep: result not recorded: store {uri}: full: ")
        assert f"spool {spool_dir}: No space left on device" in line
        (kept,) = (last / f"sweep-unrecorded-{os.getuid()}").glob("*.json")
        assert f"the result is kept in {kept}" in line and "[FINISHED] gf2" in p.stdout
        assert _leftovers(spool_dir) == [] if spool_dir.exists() else True
        filler.unlink()  # room again: the import writes it in
        _import(env, tmp_path)
        assert "3" in {r.data.params.get("problem.seed") for r in _runs(uri)}
        assert not kept.exists()


def test_a_result_no_disk_takes_is_printed_and_the_printed_line_imports(store, tmp_path, monkeypatch, capsys):
    """Spool and last resort both on the full disk: the result is printed as one line of JSON."""
    with tmpfs(tmp_path / "disk", "1m") as disk:
        monkeypatch.setenv("SWEEP_SPOOL_DIR", str(disk / "spool"))
        monkeypatch.setattr(tempfile, "tempdir", str(disk))  # $TMPDIR, where gettempdir would fall back
        fill(disk)
        result = RunResult(config={"problem": {"seed": 11}}, metrics={"accuracy": 1.0}, tags={"method": "gf2"})
        where = spool.keep(result, store, "printed", "full: no room left on its disk")
        assert f"spool {disk / 'spool'}: No space left on device" in where
        assert f"{disk}/sweep-unrecorded-{os.getuid()}: No space left on device" in where
        assert "printed on stdout above" in where and _leftovers(disk) == []
    (printed,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("{")]
    assert json.loads(printed)["result"]["config"] == {"problem": {"seed": 11}}
    saved = tmp_path / "saved.json"
    saved.write_text(printed)
    _import({"SWEEP_SPOOL_DIR": str(tmp_path / "sp")}, tmp_path, str(saved))
    assert [r.data.params["problem.seed"] for r in _runs(store)] == ["11"]


def _sweep_started(db: Path, claims: bool) -> bool:
    """The parent run is in the store (and, where the launcher writes them, its params and then its claims, the
    last write before the first job: its start is all written)."""
    query = "SELECT count(*) FROM runs r WHERE r.status = 'RUNNING'"
    if claims:
        query = (
            "SELECT count(*) FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
            f"WHERE r.status = 'RUNNING' AND t.key LIKE '{CLAIM_TAG}%'"
        )
    try:
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute(query).fetchone()[0] > 0
        finally:
            conn.close()
    except sqlite3.Error:  # not made yet
        return False


@pytest.mark.parametrize("launcher", ["sweep", "basic"])
def test_a_sweep_whose_disk_fills_mid_sweep_fails_loudly_and_keeps_its_results(tmp_path, launcher):
    """Store and spool on one disk, which fills while the first job runs (after the sweep's start checks)."""
    with tmpfs(tmp_path / "disk", "8m") as disk:
        db, spool_dir, last = disk / "st" / "mlflow.db", disk / "spool", tmp_path / "tmp"
        last.mkdir()
        uri = f"sqlite:///{db}"
        env = {"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(spool_dir), "TMPDIR": str(last)}
        args = ["-m", f"hydra/launcher={launcher}", *SLOW_JOB, "problem.seed=0,1", "hydra.launcher.n_workers=1"]
        if launcher == "basic":
            args.remove("hydra.launcher.n_workers=1")
        proc = forked_sweep.popen(args, tmp_path, forked_sweep.with_project({**os.environ, **env}), session=True)
        try:
            deadline = time.monotonic() + 240
            while not _sweep_started(db, claims=launcher != "basic"):  # the first job runs
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.02)
            filler = fill(disk)
            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        no_process_left(proc.pid)
        assert proc.returncode == 1, err
        assert "Traceback" not in err and "UserWarning" not in err, err
        lost = [ln for ln in err.splitlines() if "result is kept in" in ln]
        assert lost, err
        kept = sorted((last / f"sweep-unrecorded-{os.getuid()}").glob("*.json"))
        ends = [ln for ln in err.splitlines() if "parent run's end is kept in" in ln]  # its close refused too
        assert len(kept) == len(lost) + len(ends) and len(lost) >= 1, err  # the end: spooled, closed at import
        for line in lost:  # under the project's launcher the sweep stops at the first; basic goes on
            assert f"store {uri}: full: " in line and f"spool {spool_dir}: No space left on device" in line
        assert all(str(path) in err for path in kept)
        assert _leftovers(spool_dir) == [] if spool_dir.exists() else True
        filler.unlink()
        _import(env, tmp_path)
        seeds = [r.data.params.get("problem.seed") for r in _runs(uri) if r.info.status == "FINISHED"]
        assert sorted(s for s in seeds if s is not None) == sorted({"0", "1"} if launcher == "basic" else {"0"})
        # issue 43: the parent was left RUNNING, and the next sweep called its launcher killed. Its end, refused
        # by the full disk, is kept with the results: the import closed it FAILED, the reason on it
        (parent,) = [r for r in _runs(uri) if r.data.tags.get("sweep.parent") == "true"]
        assert parent.info.status == "FAILED", (parent.info.status, err)
        reason = parent.data.tags.get("sweep.ended_reason", "")
        assert len(ends) == 1 and "full" in reason and "sweep.killed_reason" not in parent.data.tags, (reason, err)


def test_a_sweep_whose_output_disk_fills_stops_at_the_first_job_it_fails(tmp_path):
    """hydra.sweep.dir on a disk that fills mid-sweep (the store elsewhere): every remaining job failed alike, one
    [FAILED] line each. Now the sweep stops at the first, says where and what to do, and the re-run, with room
    again, runs only what is left."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    with tmpfs(tmp_path / "out", "1m") as disk:
        filler = fill(disk)
        os.truncate(filler, filler.stat().st_size - (96 << 10))  # room for the check's 64 KiB and a few jobs
        args = ("-m", "method=gf2", "problem.n_bits=10", "problem.seed=range(0,20)", f"hydra.sweep.dir={disk}/s")
        p = sweep(*args, "hydra.launcher.n_workers=1", env=env, cwd=tmp_path)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("sweep: stopped: ")]
        assert line.startswith(f"sweep: stopped: the disk that holds the jobs' directories (hydra.sweep.dir={disk}/s)")
        assert line.endswith("make room and run this command again (what is done is skipped)"), line
        not_started = int(line.split(" not started")[0].rpartition(", ")[2])
        runs = [r for r in _runs(uri) if r.data.tags.get("sweep.parent") != "true"]
        assert p.stderr.count("[FAILED] ") == 1 and not_started > 0, p.stderr  # not one failure per job left
        assert len(runs) + not_started == 20 and "RUNNING" not in {r.info.status for r in runs}
        (parent,) = [r for r in _runs(uri) if r.data.tags.get("sweep.parent") == "true"]
        assert parent.info.status == "FAILED"
        filler.unlink()
        again = sweep(*args, env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    done = sum(r.info.status == "FINISHED" for r in runs)
    assert f"skipping {done} job(s) already done" in again.stdout, again.stdout


def test_a_single_run_is_not_refused_a_store_whose_full_disk_may_pass(made_store, tmp_path):
    """A single run refuses before its job only a store that would never take its result: a WAL store whose
    -shm a full disk cannot take is 'full' to its read check, and once room is made the spooled result goes in
    (docs/store.md's table: full, job runs, result kept). It was refused as a damaged store is."""
    from omegaconf import OmegaConf

    from sweep.preflight.refusal import Refusal
    from sweep.preflight.store import check_usable

    with tmpfs(tmp_path / "disk", "4m") as disk:
        db = tmp_path / "w.db"
        db.write_bytes(made_store.read_bytes())
        writer = sqlite3.connect(db)  # pages left in its -wal, no checkpoint: SQLite needs a -shm to open it
        writer.execute("PRAGMA journal_mode=wal")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("PRAGMA user_version=7")
        writer.commit()
        for name in ("w.db", "w.db-wal"):
            (disk / name).write_bytes((tmp_path / name).read_bytes())
        writer.close()
        fill(disk)
        config = OmegaConf.create({"mlflow": {"tracking_uri": f"sqlite:///{disk / 'w.db'}"}})
        check_usable(config, write=False)  # a single run: its job runs, its result is spooled
        with pytest.raises(Refusal, match="full: no room left"):
            check_usable(config, write=True)  # a sweep's start: refused before any job, as before
