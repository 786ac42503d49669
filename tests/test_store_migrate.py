"""`python -m sweep.store migrate`: a store made by real sweeps copied into a real `mlflow server` and into another
SQLite store, compared run by run; copied again (nothing new), interrupted and re-run (complete, no duplicates)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.record.exclusive import exclusive
from sweep.record.tags import MIGRATED_TAG, PARENT_RUN_TAG
from tests.conftest import FAULTY, ROOT, made_once, run_sweep
from tests.forked_sweep import Forked, popen, python_m, with_project

pytestmark = pytest.mark.slow
EXPERIMENT = "migrate"


def migrate(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return python_m("sweep.store", "migrate", *args, cwd=ROOT, timeout=timeout)


def record(uri: str, *overrides: str, cwd: Path) -> None:
    env = {"SWEEP_SPOOL_DIR": str(cwd / "spool")}  # never the project's own spool
    r = run_sweep(*overrides, f"mlflow.tracking_uri={uri}", f"mlflow.experiment={EXPERIMENT}", cwd=cwd, env=env)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]


def _make_source(root: Path) -> None:
    uri = f"sqlite:///{root / 'store' / 'mlflow.db'}"
    record(uri, "-m", "method=gf2,sgd", "problem.seed=0,1", cwd=root)
    record(uri, "-m", *FAULTY, "method.chunk=13,7", cwd=root)
    record(uri, "method=gf2", "problem.seed=3", cwd=root)


@pytest.fixture(scope="session")
def source() -> str:
    """A researcher's SQLite store made by real sweeps: two parent/child sweeps (one with a FAILED job) and a
    single run; 9 runs with metric histories over steps, tags and artifacts. Made once for every xdist worker;
    the tests only read it (those that change a store change a copy)."""
    return f"sqlite:///{made_once('migrate-source', _make_source) / 'store' / 'mlflow.db'}"


def client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def runs(uri: str, experiment: str = EXPERIMENT) -> list:
    c = client(uri)
    exp = c.get_experiment_by_name(experiment)
    return [] if exp is None else c.search_runs([exp.experiment_id], max_results=1000)


def artifacts(c, run_id: str, tmp: Path) -> dict[str, bytes]:
    if not c.list_artifacts(run_id):
        return {}
    root = Path(c.download_artifacts(run_id, "", str(tmp)))
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_same_runs(src_uri: str, dst_uri: str, tmp: Path, experiment: str = EXPERIMENT) -> None:
    """Every run of the source is in the target exactly once, with the same params, metric histories (step,
    value, timestamp), tags, artifacts (bytes), parent link, status, times and name."""
    s, t = client(src_uri), client(dst_uri)
    sources = {r.info.run_id: r for r in runs(src_uri, experiment)}
    copies: dict[str, object] = {}
    for r in runs(dst_uri, experiment):
        source_id = r.data.tags[MIGRATED_TAG].split(" ", 1)[0]
        assert source_id not in copies, f"run {source_id} copied twice"
        copies[source_id] = r
    assert set(copies) == set(sources)
    for sid, a in sources.items():
        b = copies[sid]
        name = a.info.run_name
        assert (b.info.status, b.info.start_time, b.info.end_time, b.info.run_name, b.info.user_id) == (
            a.info.status,
            a.info.start_time,
            a.info.end_time,
            a.info.run_name,
            a.info.user_id,
        ), name
        assert b.data.params == a.data.params, name
        tags_a = {k: v for k, v in a.data.tags.items() if k != PARENT_RUN_TAG}
        tags_b = {k: v for k, v in b.data.tags.items() if k not in (PARENT_RUN_TAG, MIGRATED_TAG)}
        assert tags_b == tags_a, name
        parent = a.data.tags.get(PARENT_RUN_TAG)
        assert b.data.tags.get(PARENT_RUN_TAG) == (copies[parent].info.run_id if parent else None), name
        assert set(b.data.metrics) == set(a.data.metrics), name
        for key in a.data.metrics:
            ha = sorted((m.step, m.timestamp, m.value) for m in s.get_metric_history(sid, key))
            hb = sorted((m.step, m.timestamp, m.value) for m in t.get_metric_history(b.info.run_id, key))
            assert hb == ha, (name, key)
        arts = artifacts(s, sid, tmp / "a" / sid)
        assert artifacts(t, b.info.run_id, tmp / "b" / sid) == arts, name


def test_source_has_what_a_migrate_must_carry(source):
    """The source holds parents and children, a FAILED run, metric histories over many steps, and artifacts."""
    rs = runs(source)
    assert len(rs) == 9
    assert sum(PARENT_RUN_TAG in r.data.tags for r in rs) == 6
    assert {r.info.status for r in rs} == {"FINISHED", "FAILED"}
    sgd = next(r for r in rs if r.data.tags.get("method") == "sgd")
    assert len(client(source).get_metric_history(sgd.info.run_id, "train_loss")) > 5
    assert client(source).list_artifacts(sgd.info.run_id)


PROGRESS = re.compile(
    r"python -m sweep\.store migrate: (?:reading the runs of |\d+ run\(s\) found, |\d+/\d+ run\(s\) \()"
)


def said(err: str) -> list[str]:
    """The lines on stderr besides the command's progress (a line as the runs are read, one once they are, one at
    each tenth)."""
    return [ln for ln in err.splitlines() if not PROGRESS.match(ln)]


def test_migrate_into_server_matches_source_run_by_run(source, server, tmp_path):
    r = migrate("--from", source, "--to", server.uri)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith(": 9 copied, 0 already there, 0 failed"), r.stdout
    # the summary, and the command's own progress lines, not MLflow's
    assert (r.stdout.count("\n"), said(r.stderr)) == (1, []), r.stdout + r.stderr
    assert_same_runs(source, server.uri, tmp_path)


def test_second_migrate_copies_nothing_and_sqlite_to_sqlite_works(source, tmp_path):
    target = f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}"
    dry = migrate("--from", source, "--to", target, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "9 to copy, 0 already there" in dry.stdout
    assert not (tmp_path / "shared").exists()  # a dry run writes nothing, not even the target store
    # another migrate into the same store still running (its lock held): two at once each took the other's copies
    # in progress for a cut-short migrate's; this one waits for nothing and writes nothing (a dry run still counts)
    with exclusive(target, "migrate"):
        busy = migrate("--from", source, "--to", target)
        assert "9 to copy" in migrate("--from", source, "--to", target, "--dry-run").stdout
    assert busy.returncode == 1 and not (tmp_path / "shared").exists(), busy.stdout
    assert busy.stderr.strip().endswith(  # `python -m sweep.store migrate: ...` as run here
        f" migrate: store {target}: another migrate into this store is running on this machine: run this "
        "one when it ends"
    )
    assert migrate("--from", source, "--to", target).returncode == 0
    again = migrate("--from", source, "--to", target)
    assert again.returncode == 0, again.stderr
    assert "0 copied, 9 already there, 0 failed" in again.stdout
    assert len(runs(target)) == 9
    # an experiment named twice (issue 43, seventh round: each run counted and copied twice, "18 to copy" of 9)
    twice = migrate("--from", source, "--to", f"{target}x", "--experiment", EXPERIMENT, "--experiment", EXPERIMENT,
                    "--dry-run")  # fmt: skip
    assert twice.returncode == 0 and "9 to copy, 0 already there" in twice.stdout, (twice.stdout, twice.stderr)
    assert_same_runs(source, target, tmp_path)


def test_migrate_lock_file_is_opened_by_every_user(tmp_path, monkeypatch):
    """The lock is named for the target, so another user's migrate into the same store opens the same file: one
    made under umask 077 was 0600, and every other user's migrate was 'Permission denied' for good."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old = os.umask(0o077)
    try:
        with exclusive(f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}", "migrate"):
            pass
    finally:
        os.umask(old)
    (lock,) = tmp_path.glob("sweep-migrate-*.lock")
    assert lock.stat().st_mode & 0o777 == 0o666
    assert not (tmp_path / "shared").exists()  # naming the lock makes no store


def test_a_copy_of_the_store_file_is_known_by_its_run_ids(source, tmp_path):
    """MLflow's run ids are random UUIDs: the same runs from a copied (moved) store file are already there."""
    target = f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}"
    assert migrate("--from", source, "--to", target).returncode == 0
    moved = tmp_path / "moved"
    shutil.copytree(Path(source[len("sqlite:///") :]).parent, moved)
    again = migrate("--from", f"sqlite:///{moved / 'mlflow.db'}", "--to", target)
    assert "0 copied, 9 already there" in again.stdout, again.stdout + again.stderr
    assert len(runs(target)) == 9


def _interrupt_mid_way(proc: Forked | subprocess.Popen, target: str, experiment: str, sig: int) -> None:
    """Send `sig` to the migrate once 1 to 5 of its 9 copies are complete; a kill -9 only while one is being
    written (RUNNING in the target)."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            states = [r.info.status for r in runs(target, experiment)]
        except Exception:  # noqa: BLE001 - a read while the migrate writes may fail: read again
            states = []
        complete = len(states) - states.count("RUNNING")
        if 1 <= complete <= 5 and (sig != signal.SIGKILL or "RUNNING" in states):
            if sig == signal.SIGKILL:  # stopped, then looked at again: the copy seen RUNNING may have ended since
                os.killpg(proc.pid, signal.SIGSTOP)
                try:
                    seen = [r.info.status for r in runs(target, experiment)]
                except Exception:  # noqa: BLE001 - stopped holding the store's lock (database is locked): later
                    seen = []
                if "RUNNING" not in seen:
                    os.killpg(proc.pid, signal.SIGCONT)
                    continue
            os.killpg(proc.pid, sig)
            proc.wait(timeout=60)
            return
        time.sleep(0.01)
    pytest.fail("the migrate ended before it could be interrupted mid-way")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "sigterm", "kill-9"])
def test_interrupted_migrate_rerun_completes_without_duplicates(source, server, tmp_path, sig):
    """Ctrl-C, SIGTERM (or kill -9) mid-migrate, then the same command: every run once, complete. Ctrl-C and
    SIGTERM leave no copy half written (SIGTERM ended it with no line, a copy left RUNNING); a copy the kill left
    unfinished is replaced, not counted as already there. Into the server for Ctrl-C, into SQLite for the others."""
    target = server.uri if sig == signal.SIGINT else f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}"
    client(target).search_experiments()  # the store exists before this test polls it (polling creates none)
    experiment = f"{EXPERIMENT}-{sig.name}"  # the server is shared by this module's tests
    src = tmp_path / "src"
    shutil.copytree(Path(source[len("sqlite:///") :]).parent, src)
    src_uri = f"sqlite:///{src / 'mlflow.db'}"
    c = client(src_uri)
    c.rename_experiment(c.get_experiment_by_name(EXPERIMENT).experiment_id, experiment)
    argv, env = ["migrate", "--from", src_uri, "--to", target], with_project(dict(os.environ))
    proc = popen(argv, ROOT, env, module="sweep.store", session=True)  # forked: its start is not what is checked
    _interrupt_mid_way(proc, target, experiment, sig)
    out, err = proc.communicate()
    states = [r.info.status for r in runs(target, experiment)]
    handled = sig != signal.SIGKILL
    if handled:  # the copy being written is finished, then the command stops
        assert proc.returncode == 128 + sig, err
        said = "Ctrl-C" if sig == signal.SIGINT else sig.name
        assert err.strip().splitlines()[-1].startswith(f"python -m sweep.store migrate: interrupted by {said}: "), err
        assert "RUNNING" not in states
    else:  # nothing ran on the way out: the half copy is there, and the re-run must not take it as done
        assert states.count("RUNNING") == 1
    complete = len(states) - states.count("RUNNING")
    assert 0 < complete < 9
    if handled:
        assert f": {complete} copied, 0 already there, 0 failed" in err, err
    again = migrate("--from", src_uri, "--to", target)
    assert again.returncode == 0, again.stderr
    assert f": {9 - complete} copied, {complete} already there, 0 failed" in again.stdout, again.stdout
    assert_same_runs(src_uri, target, tmp_path, experiment)


def test_run_still_running_is_left_then_copied_once_finished(source, tmp_path):
    """A sweep still running in the source: its finished child is copied, its parent waits for a later migrate,
    which copies it and links the child to it."""
    src = tmp_path / "src"
    shutil.copytree(Path(source[len("sqlite:///") :]).parent, src)
    src_uri, target = f"sqlite:///{src / 'mlflow.db'}", f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}"
    c = client(src_uri)
    exp = c.get_experiment_by_name(EXPERIMENT).experiment_id
    parent = c.create_run(exp, run_name="sweep in progress").info.run_id
    child = c.create_run(exp, run_name="job 0", tags={PARENT_RUN_TAG: parent}).info.run_id
    c.log_metric(child, "accuracy", 1.0, step=3)
    c.set_terminated(child)
    first = migrate("--from", src_uri, "--to", target)
    assert first.returncode == 0, first.stderr
    assert ": 10 copied, 0 already there, 0 failed, 1 still running in the source" in first.stdout, first.stdout
    (copy,) = [r for r in runs(target) if r.info.run_name == "job 0"]
    assert PARENT_RUN_TAG not in copy.data.tags
    c.set_terminated(parent, "KILLED")
    second = migrate("--from", src_uri, "--to", target)
    assert second.stdout.strip().endswith(": 1 copied, 10 already there, 0 failed"), second.stdout
    assert_same_runs(src_uri, target, tmp_path)


def test_bad_input_is_one_line_exit_2_and_creates_nothing(source, tmp_path):
    missing, target = tmp_path / "nope" / "mlflow.db", f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}"
    cases = {
        ("--from", f"sqlite:///{missing}", "--to", target): "--from store sqlite:///",
        ("--from", "mlflow.db", "--to", target): "--from mlflow.db: a directory or file: address",
        ("--from", source, "--to", source.replace("/store/", "/store/../store/")): "is the --from store",
        ("--from", source, "--to", target, "--experiment", "nope"): f"--experiment 'nope' is not in {source}: expected",
        # a ninth prober's round: a misspelt experiment was told the list alone, not the name meant
        ("--from", source, "--to", target, "--experiment", "migrat"): f"'migrat' is not in {source}: did you mean "
        f"{EXPERIMENT}? expected one of Default, {EXPERIMENT}",
        ("--to", target): "the following arguments are required: --from",
    }
    for args, line in cases.items():
        r = migrate(*args)
        assert (r.returncode, r.stdout) == (2, ""), (args, r.stdout, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and line in r.stderr, (args, r.stderr)
    assert not missing.parent.exists() and not (tmp_path / "shared").exists()
    assert len(runs(source)) == 9


def test_progress_bar_on_a_terminal_only(source, tmp_path):
    """On a terminal, rich's bar counts the runs; into a pipe only the summary line is written."""
    import pty

    target = f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}"
    main, sub = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweep.store", "migrate", "--from", source, "--to", target, "--dry-run"],
        cwd=ROOT,
        stdin=sub,
        stdout=sub,
        stderr=sub,
    )
    os.close(sub)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=120) == 0
    os.close(main)
    assert b"9/9" in seen and b"9 to copy" in seen, seen[-2000:]
    # into a pipe (a log, CI) a line says what it does and one at each tenth of the runs (it was silent for 81 s)
    piped = migrate("--from", source, "--to", target, "--dry-run")
    assert (said(piped.stderr), piped.stdout.count("\n")) == ([], 1), piped.stdout + piped.stderr
    lines = piped.stderr.splitlines()
    assert lines[-10].endswith("9 run(s) found, 9 not copied yet; counting them"), lines
    assert lines[-11].endswith(f": reading the runs of {source} and what {target} has of them"), lines  # at once
    assert [ln.split(": ")[1].split(" (")[0] for ln in lines[-9:]] == [f"{i}/9 run(s)" for i in range(1, 10)]


def test_a_run_that_cannot_be_copied_is_named_and_the_rest_go_on(source, tmp_path):
    """One run's artifact is a dangling link (its file gone): that run is named on one line, with MLflow's cause,
    and not left in the target; the 8 others are copied, exit 1. Once the file is back, the ninth is copied."""
    src = tmp_path / "src"
    shutil.copytree(Path(source[len("sqlite:///") :]).parent, src, symlinks=True)
    src_uri, target = f"sqlite:///{src / 'mlflow.db'}", f"sqlite:///{tmp_path / 'shared' / 'mlflow.db'}"
    broken = next(r for r in runs(src_uri) if r.data.tags.get("method") == "sgd")
    c = client(src_uri)
    # the copied store's runs still point at the original artifacts: point this one's at a private copy
    config = Path(c.download_artifacts(broken.info.run_id, "config.yaml", str(tmp_path / "dl")))
    art = src / "own-artifacts"
    shutil.copytree(config.parent, art)
    (art / "config.yaml").unlink()
    (art / "config.yaml").symlink_to("gone.yaml")  # inside the run's artifacts: MLflow refuses a link outside
    with __import__("sqlite3").connect(src / "mlflow.db") as db:
        db.execute("UPDATE runs SET artifact_uri = ? WHERE run_uuid = ?", (art.as_uri(), broken.info.run_id))
    r = migrate("--from", src_uri, "--to", target)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.strip().endswith(": 8 copied, 0 already there, 1 failed"), r.stdout
    (line,) = said(r.stderr)
    assert line.startswith(f"python -m sweep.store migrate: run {broken.info.run_id}: ") and "config.yaml" in line, line
    assert len(runs(target)) == 8  # no part of the failed run stays in the target
    (art / "config.yaml").unlink()
    (art / "config.yaml").write_text(config.read_text())
    again = migrate("--from", src_uri, "--to", target)
    assert again.stdout.strip().endswith(": 1 copied, 8 already there, 0 failed"), again.stdout + again.stderr
