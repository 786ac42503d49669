"""Faults and bad input, driven as a user meets them: real `python -m sweep` processes against real stores that
are read-only (as a non-root user: root ignores file modes), truncated, not SQLite, missing, or named oddly.
Each test asserts the exit code, the one line said, what the store holds and that no result was lost."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests import forked_sweep
from tests.conftest import journal_folded, made_once, record_small_sweep, session_processes

ROOT = Path(__file__).resolve().parents[1]
NOBODY = 65534


def _runs(uri: str) -> list:
    c = MlflowClient(uri)
    return [r for e in c.search_experiments() for r in c.search_runs([e.experiment_id])]


def no_process_left(sid: int) -> None:
    deadline = time.monotonic() + 10
    while session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert session_processes(sid) == [], "a process outlived the command"


def sweep(
    *args: str, env: dict, cwd: Path, as_nobody: bool = False, module: str = "sweep", timeout: float = 300
) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` in a subprocess of its own session; `as_nobody`: as an unprivileged user when this
    is root (file modes bind it), so a read-only store is read-only for real. Asserts that no process it
    started outlives it."""
    cmd = [sys.executable, "-m", module, *args]
    if not as_nobody and forked_sweep.forkable(full := forked_sweep.with_project({**os.environ, **env})):
        done = forked_sweep.run(list(args), cwd, full, timeout, module=module, session=True)
        no_process_left(done.pid)
        return done
    if as_nobody and os.geteuid() == 0:  # setpriv execs python: same pid, same session
        cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]
        env = {"HOME": str(cwd), **env}  # root's home is not nobody's to write
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    no_process_left(proc.pid)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def one_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def _make_store(d: Path) -> None:
    uri = f"sqlite:///{d / 'mlflow.db'}"
    p = sweep(
        "method=gf2", "problem.n_bits=10", env={"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(d / "sp")}, cwd=d
    )
    assert p.returncode == 0, p.stderr


@pytest.fixture(scope="session")
def made_store() -> Path:
    """A real store with one finished run, made once for the session's every worker and module (it was a sweep
    per module and worker); the tests only read it (those that break it break a copy)."""
    return made_once("made-store", _make_store) / "mlflow.db"


@pytest.fixture
def open_dir():
    """A directory every user can enter (pytest's tmp_path is root's alone): for runs as nobody."""
    d = Path(tempfile.mkdtemp(prefix="sweep-faults-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def read_only_store(made_store: Path, d: Path) -> str:
    """A copy of the made store in `d/ro/`, file and directory without write permission; a spool and an output
    directory that nobody can write."""
    (d / "ro").mkdir()
    shutil.copy(made_store, d / "ro" / "mlflow.db")
    (d / "ro" / "mlflow.db").chmod(0o444)
    (d / "ro").chmod(0o555)
    for sub in ("spool", "work"):
        (d / sub).mkdir()
        (d / sub).chmod(0o777)
    return f"sqlite:///{d / 'ro' / 'mlflow.db'}"


# -- 1. a result is saved or the command fails loudly --------------------------------------------------------
def test_single_run_on_read_only_store_spools_then_import_writes_it(made_store, open_dir):
    uri = read_only_store(made_store, open_dir)
    env = {"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(open_dir / "spool")}
    p = sweep("method=gf2", "problem.n_bits=12", "problem.seed=5", env=env, cwd=open_dir / "work", as_nobody=True)
    assert p.returncode == 1, p.stderr
    line = one_line(p.stderr)
    assert line.startswith(f"sweep: result not recorded: store {uri}: read-only") and "spool" in line
    assert "[FINISHED] gf2" in p.stdout  # the user still sees the result
    (spooled,) = (open_dir / "spool").glob("*.json")
    assert str(spooled) in line
    before = {r.info.run_id for r in _runs(uri)}
    (open_dir / "ro").chmod(0o755)
    (open_dir / "ro" / "mlflow.db").chmod(0o644)
    p = sweep("import", env=env, cwd=open_dir / "work", module="sweep.spool")
    assert p.returncode == 0 and "1 result(s) written" in p.stdout, p.stderr
    (new,) = [r for r in _runs(uri) if r.info.run_id not in before]
    assert new.data.params["problem.seed"] == "5" and new.data.metrics["accuracy"] == 1.0
    assert not list((open_dir / "spool").glob("*.json"))


def test_a_store_the_user_cannot_read_is_one_line_before_any_job(made_store, open_dir):
    """Another user's store file (mode 0600): a single run, like a sweep, is refused before its job; its result
    would be spooled for a store this user cannot open (docs/store.md's table)."""
    (open_dir / "st").mkdir()
    db = open_dir / "st" / "mlflow.db"
    shutil.copy(made_store, db)
    db.chmod(0o600)
    (open_dir / "work").mkdir(mode=0o777)
    (open_dir / "work").chmod(0o777)
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{db}", "SWEEP_SPOOL_DIR": str(open_dir / "work" / "spool")}
    for args in (["method=gf2"], ["-m", "method=gf2,km"]):
        p = sweep(*args, "problem.n_bits=10", env=env, cwd=open_dir / "work", as_nobody=True)
        assert p.returncode == 1 and "FINISHED" not in p.stdout, (p.stdout, p.stderr)
        assert one_line(p.stderr) == f"sweep: store sqlite:///{db}: cannot be read (Permission denied)", p.stderr
    assert not (open_dir / "work" / "spool").exists()


@pytest.mark.parametrize("launcher", ["sweep", "basic"])
def test_sweep_on_read_only_store_fails_in_seconds_before_any_job(made_store, open_dir, launcher):
    uri = read_only_store(made_store, open_dir)
    before = {(r.info.run_id, r.info.status) for r in _runs(uri)}
    t0 = time.monotonic()
    p = sweep(
        "-m",
        f"hydra/launcher={launcher}",
        "method=gf2,km",
        "problem.n_bits=10",
        env={"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(open_dir / "spool")},
        cwd=open_dir / "work",
        as_nobody=True,
    )
    assert time.monotonic() - t0 < 60  # MLflow alone retries for ~100 s
    assert p.returncode == 1
    assert one_line(p.stderr).startswith(f"sweep: store {uri}: read-only")
    assert "FINISHED" not in p.stdout  # no job ran, so none is lost
    assert {(r.info.run_id, r.info.status) for r in _runs(uri)} == before == {(next(iter(before))[0], "FINISHED")}


@pytest.mark.new_store
def test_next_command_writes_spooled_results_in(tmp_path, store):
    """A result spooled against a store not made yet (a single run whose store refused it; a damaged store is
    refused before the job, sweep.preflight.store) is written by the next command that records into it."""
    from sweep import job
    from sweep.record import spool
    from tests.conftest import compose

    spool.keep(job.run(compose("method=gf2", "problem.seed=3")), store, "sweep", "the store refused it")
    p = sweep("method=km", env={}, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "1 spooled result(s) written" in p.stdout
    assert sorted(r.data.tags["method"] for r in _runs(store)) == ["gf2", "km"]


def test_a_spooled_result_that_fails_again_stays_and_blocks_nothing(store, capsys):
    """One spooled result the store refuses (a metric name MLflow rejects) stays in the spool with one line;
    the other is written and the store stays usable."""
    from sweep import job
    from sweep.record import spool
    from sweep.record.recorder import Recorder
    from tests.conftest import compose

    Recorder(store, "e")  # the store exists
    good, bad = (job.run(compose(f"method={m}", "problem.n_bits=10")) for m in ("gf2", "km"))
    bad.metrics["bad metric!"] = 1.0
    spool.keep(bad, store, "e", "test")
    spool.keep(good, store, "e", "test")
    Recorder(store, "e")  # opening it imports the spool: it does not raise
    err = capsys.readouterr().err
    assert "not written" in err and "it stays in the spool" in err
    assert [e.result.tags["method"] for e in spool.entries(store)] == ["km"]
    assert [r.data.tags["method"] for r in _runs(store)] == ["gf2"]


def test_a_result_claimed_by_an_import_that_was_killed_is_imported_again(store, tmp_path):
    """An import killed (SIGKILL, a power cut) between claiming a spool file and writing it left the file renamed
    X.json.PID.claimed, which no later `list` or `import` read: the result lost without a word. A claim whose
    process is gone is the spool's again; one a live import holds is left to it."""
    from sweep import job
    from sweep.record import spool
    from sweep.record.recorder import Recorder
    from tests.conftest import compose

    Recorder(store, "e")  # the store exists
    dead = subprocess.Popen(["true"])
    dead.wait()
    for m in ("gf2", "km"):
        spool.keep(job.run(compose(f"method={m}", "problem.n_bits=10")), store, "e", "t")
    lost, held = (e.path for e in sorted(spool.entries(store), key=lambda e: e.result.tags["method"]))  # gf2, km
    lost.rename(lost.with_name(f"{lost.name}.{dead.pid}.claimed"))  # as a killed import left it
    held.rename(held.with_name(f"{held.name}.{os.getpid()}.claimed"))  # a live import's
    p = sweep("list", env={}, cwd=tmp_path, module="sweep.spool")
    assert p.returncode == 0 and "1 result(s)" in p.stdout and "gf2" in p.stdout, p.stdout + p.stderr
    p = sweep("import", env={}, cwd=tmp_path, module="sweep.spool")
    assert p.returncode == 0 and "1 result(s) written" in p.stdout, p.stdout + p.stderr
    assert [r.data.tags["method"] for r in _runs(store)] == ["gf2"]
    assert [f.name.endswith(".claimed") for f in spool.spool_dir().iterdir()] == [True]  # the live one's, untouched


def test_sigterm_mid_import_is_one_line_and_each_result_is_written_or_still_waits(store, tmp_path):
    """`sweep-spool import` stopped by SIGTERM mid-way (it ended silently, 143, the result it held claimed and
    read by nothing after): one line, 143; each result is in the store or back in the spool, none twice."""
    from sweep import job
    from sweep.record import spool
    from sweep.record.recorder import Recorder
    from tests.conftest import compose

    Recorder(store, "e")
    result = job.run(compose("method=gf2", "problem.n_bits=10"))
    total = 300
    for _ in range(total):
        spool.keep(result, store, "e", "t")
    d = spool.spool_dir()
    env = forked_sweep.with_project(dict(os.environ))
    p = forked_sweep.popen(["import"], tmp_path, env, module="sweep.spool", session=True)  # its start is not checked
    deadline = time.monotonic() + 60
    while len(list(d.iterdir())) > total - 3 and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    p.send_signal(15)
    err = p.communicate(timeout=60)[1]
    no_process_left(p.pid)
    assert p.returncode == 143 and "interrupted by SIGTERM" in one_line(err), err
    left = list(d.iterdir())
    assert not [f for f in left if not f.name.endswith(".json")], left
    assert 0 < len(left) < total and len(_runs(store)) + len(left) == total


@pytest.mark.new_store
def test_experiment_name_over_mlflow_limit_is_refused_before_the_job(store, tmp_path):
    p = sweep("method=gf2", "mlflow.experiment=" + "x" * 600, env={}, cwd=tmp_path)
    assert p.returncode == 2
    assert "mlflow.experiment=" in one_line(p.stderr) and "1 to 500 characters" in p.stderr
    assert not Path(store[len("sqlite:///") :]).exists()


# -- 2. unknown preset --------------------------------------------------------------------------------------
@pytest.mark.new_store
@pytest.mark.parametrize("preset", ["nope", "ard_variant"])
def test_unknown_preset_exits_2_with_the_presets(store, tmp_path, preset):
    p = sweep(f"sweeps={preset}", env={}, cwd=tmp_path)
    assert p.returncode == 2
    line = one_line(p.stderr)
    assert f"sweeps={preset} is not a preset" in line and "ard_variants" in line and "tiled_w1" in line
    assert ("did you mean ard_variants?" in line) == (preset == "ard_variant"), line
    assert not Path(store[len("sqlite:///") :]).exists() and p.stdout == ""


# -- 4. corrupt, read-only, missing stores ------------------------------------------------------------------
@pytest.mark.parametrize("launcher", ["sweep", "basic"])
def test_sweep_on_truncated_store_fails_in_seconds_with_one_line(made_store, tmp_path, launcher):
    db = tmp_path / "mlflow.db"
    db.write_bytes(made_store.read_bytes()[: made_store.stat().st_size // 2])
    uri = f"sqlite:///{db}"
    t0 = time.monotonic()
    p = sweep(
        "-m",
        f"hydra/launcher={launcher}",
        "method=gf2,km",
        env={"MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(tmp_path / "sp")},
        cwd=tmp_path,
    )
    assert time.monotonic() - t0 < 60  # MLflow alone retries for ~100 s
    assert p.returncode == 1
    assert (
        one_line(p.stderr) == f"sweep: store {uri}: corrupt: truncated "
        f"({db.stat().st_size} bytes, its header says {made_store.stat().st_size})"
    )
    assert "FINISHED" not in p.stdout  # no job ran


def test_compare_on_truncated_store_says_so_in_one_line(made_store, tmp_path):
    db = tmp_path / "mlflow.db"
    db.write_bytes(made_store.read_bytes()[: made_store.stat().st_size // 2])
    before = db.read_bytes()
    p = sweep("demo", "--tracking-uri", f"sqlite:///{db}", env={}, cwd=tmp_path, module="sweep.compare")
    assert p.returncode == 1
    assert "corrupt: truncated" in one_line(p.stderr)
    assert db.read_bytes() == before  # read, never written


def test_compare_reads_a_read_only_store_and_never_creates_one(open_dir, tmp_path):
    # a real sweep's store, then read-only
    d = open_dir / "ro"
    d.mkdir()
    uri = f"sqlite:///{d / 'mlflow.db'}"
    rec, parent, results = record_small_sweep(uri, "demo", "demo", "problem.n_bits=10")
    rec.end_parent(parent, "FINISHED", results)
    (d / "mlflow.db").chmod(0o444)
    d.chmod(0o555)
    (open_dir / "work").mkdir(mode=0o777)
    (open_dir / "work").chmod(0o777)
    p = sweep(
        "demo",
        "--markdown",
        "--no-plot",
        "--out",
        str(open_dir / "work" / "o"),
        "--tracking-uri",
        uri,
        env={},
        cwd=open_dir / "work",
        as_nobody=True,
        module="sweep.compare",
    )
    assert p.returncode == 0, p.stderr
    assert "| gf2 | 2/2 |" in p.stdout
    assert "read-only" in one_line(p.stderr) and "not logged" in p.stderr
    # an empty directory: no store, one line, nothing created
    empty = tmp_path / "empty"
    empty.mkdir()
    p = sweep(
        "demo", "--tracking-uri", f"sqlite:///{empty / 'mlflow.db'}", env={}, cwd=tmp_path, module="sweep.compare"
    )
    assert p.returncode == 2 and "no store there" in one_line(p.stderr)
    assert list(empty.iterdir()) == []


# -- 5. study names are data --------------------------------------------------------------------------------
def test_compare_quotes_names_and_keeps_files_inside_outputs(store, tmp_path):
    from sweep.paths import PROJECT_ROOT
    from sweep.report import compare as cmpmod

    for study in ("o'brien", "../../escape"):
        rec, parent, results = record_small_sweep(store, study, study, "problem.n_bits=10")
        rec.end_parent(parent, "FINISHED", results)
        cmp, files = cmpmod.compare(study, store, plot=True)
        try:
            assert cmp.parent_id == parent and cmp.study == study
            outputs = (PROJECT_ROOT / "outputs" / "compare").resolve()
            for f in files:
                assert f.resolve().parent.parent == outputs, f
        finally:
            shutil.rmtree(files[0].parent, ignore_errors=True)


# -- 3. two first sweeps on a store that does not exist yet ----------------------------------------------------
@pytest.mark.new_store
def test_two_first_sweeps_on_a_new_store_both_record(store, tmp_path):
    env = forked_sweep.with_project(
        {**os.environ, "MLFLOW_TRACKING_URI": store, "SWEEP_SPOOL_DIR": str(tmp_path / "sp")}
    )
    args = ("-m", "method=gf2,km", "hydra.launcher.n_workers=1")
    procs = [
        forked_sweep.popen(
            [*args, f"problem.seed={s}", f"hydra.sweep.dir={tmp_path / str(s)}"], tmp_path, env, session=True
        )
        for s in (1, 2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p in procs:
        no_process_left(p.pid)
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "Traceback" not in err
    runs = _runs(store)
    parents = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 2 and len(children) == 4
    assert all(r.info.status == "FINISHED" for r in runs)


# -- two sweeps of the same configs at once: each config recorded once ----------------------------------------------
SLOW_SGD = ("method=sgd", "method.lr=0.01", "method.max_epochs=30", "problem.n_bits=10", "tracker=none")


def two_sweeps_at_once(uri: str, cwd: Path, *args: str, env: dict | None = None) -> list:
    """The same sweep of 40 seeds started twice at the same moment (two terminals, two machines): both end with
    exit 0, every config has exactly one FINISHED run, and each sweep's summary accounts for its 40 jobs:
    finished, skipped as done, or left to the other ("not run: another sweep is running them")."""
    args = ("-m", *args, "problem.seed=range(0,40)", "hydra/launcher=local", "mlflow.experiment=twice")
    env = forked_sweep.with_project(
        {**os.environ, "MLFLOW_TRACKING_URI": uri, "SWEEP_SPOOL_DIR": str(cwd / "sp"), **(env or {})}
    )
    procs = [forked_sweep.popen(list(args), cwd, env, session=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        no_process_left(p.pid)
        assert p.returncode == 0 and "Traceback" not in err, err
        (summary,) = [ln for ln in (out + err).splitlines() if re.match(r"sweep: \d+ job\(s\) finished", ln)]
        finished, skipped = (
            int(x) for x in re.findall(r"(\d+) job\(s\) finished, 0 failed, (\d+) skipped", summary)[0]
        )
        elsewhere = re.findall(r", (\d+) not run: another sweep is running them \(parent run (\w+);", summary)
        assert finished + skipped + sum(int(n) for n, _ in elsewhere) == 40, summary
    from tests.test_launcher import runs

    if uri.startswith("sqlite:///"):  # the last sweep to end folded the store's -wal into its file
        journal_folded(uri)
    parents, children = runs(uri, "twice")
    hashes = [c.data.tags["sweep.config_hash"] for c in children if c.info.status == "FINISHED"]
    assert len(hashes) == len(set(hashes)) == 40, f"{len(hashes)} FINISHED runs for 40 configs"
    assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents)
    assert not [k for p in parents for k in p.data.tags if k.startswith("sweep.claim.")]  # claims gone at the end
    return outs


@pytest.mark.parametrize("batch", ["1", "8"])
def test_two_identical_sweeps_at_once_record_each_config_once(store, tmp_path, batch):
    """Case 5 of issue 35 on an existing store, unbatched and batched: 80 FINISHED runs for 40 configs before."""
    two_sweeps_at_once(store, tmp_path, *SLOW_SGD, f"hydra.launcher.batch={batch}")


@pytest.mark.new_store
def test_two_identical_first_sweeps_on_a_new_store_record_each_config_once(store, tmp_path):
    """Case 5 of issue 35 on a store neither sweep has made yet."""
    two_sweeps_at_once(store, tmp_path, *SLOW_SGD)


def test_two_identical_single_runs_at_once_record_the_config_once_and_force_still_repeats(store, tmp_path):
    """Issue 43: two identical single runs at once recorded the config twice (a single run took no claim). Now
    one records it and the other says another holds it, exit 0; mlflow.force=true still records a repeat, and
    the holders of the claims leave no run behind."""
    args = ("method=sgd", "method.lr=0.0003", "method.max_epochs=600", "problem.n_bits=10", "tracker=none")
    args = (*args, "problem.seed=5")  # a job of 1-3 s: the two overlap, whatever their start-ups take
    env = forked_sweep.with_project({**os.environ, "SWEEP_SPOOL_DIR": str(tmp_path / "sp")})
    procs = [forked_sweep.popen(list(args), tmp_path, env) for _ in range(2)]
    outs = sorted(p.communicate(timeout=300)[0] for p in procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert "[FINISHED]" in outs[0] and "another sweep is running them" in outs[1], outs
    p = sweep(*args, "mlflow.force=true", env={}, cwd=tmp_path)
    assert p.returncode == 0 and "[FINISHED]" in p.stdout, p.stderr
    runs = _runs(store)
    assert sorted(r.data.params.get("extra.repeat", "0") for r in runs) == ["0", "1"], [r.info.run_name for r in runs]
    assert all(r.info.status == "FINISHED" and "sweep.parent" not in r.data.tags for r in runs)
    # nothing of the holders in the store's file (deleted rows were counted by the store check as runs)
    with sqlite3.connect(store.removeprefix("sqlite:///")) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
        assert conn.execute("SELECT count(*) FROM tags WHERE key LIKE 'sweep.claim%'").fetchone()[0] == 0


# -- values with no meaning, interpolations that do not resolve, sweeps of no job: one line, exit 2, no run --------
@pytest.mark.parametrize(
    "args, line",
    [
        (("method.target_accuracy=nan",), "method.target_accuracy=nan is not allowed: expected a number in (0, 1]"),
        (("variant=fused", "method=gf2"), "variant=fused does not apply to method=gf2"),
        (("problem.seed=${oops}",), "problem.seed=${oops} cannot be resolved: Interpolation key 'oops' not found"),
        (
            ("-m", "problem.seed=${oops}", "method=gf2,km"),
            "problem.seed=${oops} cannot be resolved: Interpolation key 'oops' not found",
        ),
        (
            ("-m", "hydra/launcher=basic", "problem.seed=${oops}", "method=gf2,km"),
            "problem.seed=${oops} cannot be resolved: Interpolation key 'oops' not found",
        ),
        (("-m", "problem.seed=range(0)"), "problem.seed=range(0) sweeps over no value, so the sweep has no job"),
        (("-m", "problem.seed=range(5,1)", "method=gf2,km"), "problem.seed=range(5,1) sweeps over no value"),
        # issue 43, seventh round: each was a traceback of Hydra's sweep iterator (15-19 lines, exit 1)
        (("-m", "problem.seed=interval(1,2)"), "problem.seed=interval(1,2) is a search's interval"),
        (("-m", "problem.seed=range(0,10,0)"), "problem.seed=range(0,10,0) steps by 0: expected range(start,stop)"),
        (("-m", "method=glob(zz*)"), "method=glob(zz*) sweeps over no value"),
        # a key the recording reads: the job ran and its result was lost (exit 0), or a 105-line traceback
        (("run_name=${oops}",), "run_name=${oops} cannot be resolved: Interpolation key 'oops' not found"),
        (
            ("-m", "hydra/launcher=basic", "run_name=${oops}", "method=gf2,km"),
            "run_name=${oops} cannot be resolved: Interpolation key 'oops' not found",
        ),
        # a single run's override_dirname holds `run_name=${hydra:job.override_dirname}` itself, unescaped: it was
        # named `hydra.job.override_dirname=? cannot be resolved` (the key its value reads), with no way out
        (
            ("run_name=${hydra:job.override_dirname}",),
            "run_name=${hydra:job.override_dirname} cannot be resolved: RecursionError raised while resolving "
            "interpolation: maximum recursion depth exceeded (leave it out of the name: "
            "hydra.job.config.override_dirname.exclude_keys=[run_name])",
        ),
    ],
    ids=[
        "nan", "variant", "interpolation", "interpolation-m", "interpolation-basic", "range0", "range51", "interval",
        "step0", "glob-none", "run_name", "run_name-basic", "run_name-itself",
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2_and_records_nothing(store, tmp_path, args, line):
    """Case 8 of issue 35 through real commands. Each of these ran and was recorded FINISHED, or was a 28-85 line
    traceback, or a sweep of no job that
    exited 0 with "0 job(s) finished"."""
    p = sweep(*args, "problem.n_bits=10", env={}, cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    said = one_line(p.stderr)
    assert said.startswith("sweep: config error") and line in said, said
    assert _runs(store) == [] and "[FINISHED]" not in p.stdout


def test_a_glob_of_a_groups_options_is_swept(store, tmp_path):
    """Issue 43, seventh round: `method=glob(...)`, Hydra's sweep over a group's options by name, was a traceback
    ("ConfigLoader is not set", exit 1) under every launcher: the preflight listed it without Hydra's loader."""
    p = sweep("-m", "method=glob(gf*)", "problem.n_bits=10", "hydra/launcher=basic", env={}, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert [r.data.tags.get("method") for r in _runs(store) if r.data.tags.get("sweep.parent") != "true"] == ["gf2"]


def test_a_run_name_of_hydras_override_dirname_names_each_job(store, tmp_path):
    """Issue 43, seventh round: `run_name=${hydra:job.override_dirname}`, Hydra's idiom for a run's name, was a
    116-line traceback under the project's launcher (its plan read the name before Hydra set the job's config);
    each job is named as Hydra's basic launcher names it."""
    p = sweep("-m", "run_name=${hydra:job.override_dirname}", "method=gf2", "problem.n_bits=10", "problem.seed=1,2",
              env={}, cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    names = sorted(r.info.run_name for r in _runs(store) if r.data.tags.get("sweep.parent") != "true")
    assert [n.split(",")[:3] for n in names] == [
        ["method=gf2", "problem.n_bits=10", f"problem.seed={s}"] for s in (1, 2)
    ]


def test_a_shell_with_few_open_files_is_one_line_before_any_job(store, tmp_path):
    """`ulimit -n 12` (a worker's pipe refused) and 13 (MLflow's import refused, the workers holding the rest)
    were 54 and 58 lines of traceback, exit 1. At every such limit: one line, exit 1 (those two naming the limit),
    the parent not left RUNNING, no process left; or the sweep runs."""
    import resource

    def limited(n: int):
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    args = ["-m", "method=gf2", "problem.seed=1,2", "hydra/launcher=local", "hydra.launcher.n_workers=2"]
    procs = {
        n: subprocess.Popen(
            [sys.executable, "-m", "sweep", *args],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=limited(n),
        )  # fmt: skip
        for n in (11, 12, 13, 14)
    }
    said = {}
    for n, p in procs.items():
        err = p.communicate(timeout=120)[1]
        no_process_left(p.pid)
        assert p.returncode in (0, 1) and "Traceback" not in err, (n, err)
        if p.returncode:
            said[n] = one_line(err)
            assert said[n].startswith("sweep: "), said[n]
    assert {n for n, line in said.items() if "open files" in line and "ulimit -n" in line}, said
    assert not [r for r in _runs(store) if r.info.status == "RUNNING"]


def test_a_run_that_diverges_is_recorded_without_numpys_warnings(store, tmp_path):
    """Issue 43, seventh round: `method.lr=1e30` (an lr sweep's far end) printed numpy's overflow warnings, ten
    lines with their source lines (36 of forward_forward's at lr=1e6), before the run's line; the run is a result
    like any other, its figures say it diverged."""
    p = sweep("method.lr=1e30", "problem.n_bits=10", "method.max_epochs=20", env={}, cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == "" and "[FINISHED] sgd" in p.stdout, (p.stdout, p.stderr)
    (run,) = _runs(store)
    assert run.data.metrics["accuracy"] < 0.7  # chance: it diverged


def test_more_workers_than_cpus_are_cut_to_the_cpus_with_one_line(store, tmp_path):
    """Case 8 of issue 35: hydra.launcher.n_workers=100000 started a worker per job (40 processes on 2 cores)."""
    cpus = len(os.sched_getaffinity(0))
    args = ("-m", "method=gf2", "problem.n_bits=10", "problem.seed=range(0,8)", "hydra/launcher=local")
    p = sweep(*args, "hydra.launcher.n_workers=100000", env={}, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    said = f"sweep: hydra.launcher.n_workers=100000 is more than the {cpus} CPU(s) this machine gives the sweep"
    assert [ln for ln in p.stderr.splitlines() if "n_workers" in ln] == [f"{said}: {cpus} worker(s)"]
    (parent,) = [r for r in _runs(store) if r.data.tags.get("sweep.parent") == "true"]
    assert parent.data.params["launcher.n_workers"] == str(cpus)


# -- 7. size guard, unused additions ---------------------------------------------------------------------------
def _limited(limit_bytes: int):
    def set_limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return set_limit


@pytest.mark.new_store
@pytest.mark.parametrize("override", ["problem.n_bits=100000", "problem.n_train=100000000", "method.hidden=10000000"])
def test_job_too_big_for_memory_is_refused_naming_the_field(store, tmp_path, override):
    """Under a 2.5 GB address-space limit (what a container or `ulimit -v` gives), each of these would climb
    for minutes before failing; the estimate refuses it before the job, naming the field."""
    p = subprocess.run(
        [sys.executable, "-m", "sweep", override],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limited(2_500_000_000),
    )
    assert p.returncode == 2, p.stderr
    line = one_line(p.stderr)
    assert "GB of memory" in line and line.endswith(f"lower {override}")
    assert not Path(store[len("sqlite:///") :]).exists()


@pytest.mark.new_store
def test_unused_top_level_addition_is_refused(store, tmp_path):
    p = sweep("+foo=bar", env={}, cwd=tmp_path)
    assert p.returncode == 2 and "+foo=bar is not read by any job" in one_line(p.stderr)
    assert "+extra.foo=" in p.stderr and not Path(store[len("sqlite:///") :]).exists()


def _start_until_one_finished(store: str, tmp_path: Path, *args: str) -> subprocess.Popen:
    """A sweep of gf2 seeds 1 and 0 (seed 0 runs 3 s) on one worker, returned once seed 1 is recorded."""
    from tests.test_faults_signals import start_command

    proc = start_command(
        tmp_path, "-m", "method=gf2", "method._target_=tests.worker_pid.SlowSeed0GF2", "tracker=none",
        "hydra.launcher.n_workers=1", *args,
        env=forked_sweep.with_project({**os.environ, "MLFLOW_TRACKING_URI": store}),
    )  # fmt: skip
    line = ""
    while not line.startswith("[FINISHED]") and (line or proc.poll() is None):
        line = proc.stdout.readline()
    if not line.startswith("[FINISHED]"):
        os.killpg(proc.pid, 9)
        raise AssertionError(proc.stderr.read())
    return proc


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_a_store_file_removed_or_replaced_mid_sweep_stops_it_and_keeps_the_results(store, tmp_path, how):
    # the sweep went on writing into the unlinked file: '4 done', exit 0, and no run of it on disk
    db = Path(store[len("sqlite:///") :])
    proc = _start_until_one_finished(store, tmp_path, "problem.seed=1,0,2,3", "mlflow.experiment=gone")
    try:
        if how == "removed":  # seed 0 runs 3 s: the runs after it are written after this
            db.unlink()
        else:
            shutil.copy(db, tmp_path / "copy.db")
            os.replace(tmp_path / "copy.db", db)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    assert proc.returncode == 1, err
    assert f"its file {db} was removed or replaced while this command was writing it" in err, err
    assert "sweep: stopped: store" in err and "the result is kept in" in err, err
    assert len(list((tmp_path / "spool").glob("*.json"))) >= 2  # seed 0's run, and the parent's end
    assert session_processes(proc.pid) == []


def test_a_parent_the_store_will_not_close_at_the_end_fails_the_sweep_in_one_line(store, tmp_path):
    # the parent deleted mid-sweep (MLflow's UI, `mlflow runs delete`): its close at the sweep's end raised out of
    # Hydra's callback, which made it a UserWarning and exit 0 (a tracking server killed at the end: the same)
    db = Path(store[len("sqlite:///") :])
    proc = _start_until_one_finished(store, tmp_path, "problem.seed=1,0", "mlflow.experiment=unclosed")
    try:
        with sqlite3.connect(db, timeout=30) as conn:  # as `mlflow runs delete` does
            conn.execute(
                "UPDATE runs SET lifecycle_stage = 'deleted' WHERE run_uuid IN "
                "(SELECT run_uuid FROM tags WHERE key = 'sweep.parent' AND value = 'true')"
            )
        conn.close()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    assert proc.returncode == 1, err
    assert "UserWarning" not in err and "Traceback" not in err, err
    assert re.search(r"^sweep: parent run \w+ not closed: .*no active run .*the parent run's end is kept in", err, re.M)
    assert re.search(r"2 job\(s\) finished, 0 failed, 0 skipped; parent run \w+ not closed$", out + err, re.M), out
