"""Shared fixtures: every test that records writes a real MLflow store in a temporary directory."""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]

# One OpenMP/BLAS thread a process, in this process (before torch and numpy make their pools), xdist's workers
# and every command a test starts: xdist runs a worker per core already, and a pool of a thread per core beside
# them spins waiting on descheduled siblings (test_batch_methods' sgd on torch_cpu: 13.3 -> 4.3 CPU s, 24 ->
# 12 s, on 2 busy cores). device.threads still sets a pool (test_devices); an explicit setting is kept.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from tests import forked_sweep  # noqa: E402 - after the settings above, which the commands it forks start with


@pytest.fixture(autouse=True)
def no_process_outlives_its_test():
    """What a test starts in its own process (a launcher's workers, launched in-process as Hydra's suites do) ends
    with it: a sweep launched with none of sweep's hooks once left its workers, ~30 idle forks by the suites' end."""
    yield
    import multiprocessing

    assert multiprocessing.active_children() == []


def _make_empty_store(d: Path) -> None:
    from sweep.record.creation import create

    create(f"sqlite:///{d / 'mlflow.db'}")  # the project's own making, as a first command's


@pytest.fixture
def store(request, tmp_path, monkeypatch) -> str:
    """A SQLite MLflow store of this test's own; MLFLOW_TRACKING_URI points at it for this test and its
    subprocesses. Made already: a copy of an empty store made once a session, since a command into a store that
    exists skips MLflow's import and its ~60 schema migrations (about 2.5 of a small sweep's 3.5 CPU s). A test
    marked `new_store` (one about making a store, or about making none) gets a store not made yet."""
    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("SWEEP_SPOOL_DIR", str(tmp_path / "spool"))  # never the project's own spool
    if request.node.get_closest_marker("new_store") is None:
        (tmp_path / "mlruns").mkdir()
        shutil.copy(made_once("empty-store", _make_empty_store) / "mlflow.db", tmp_path / "mlruns" / "mlflow.db")
    return uri


def journal_folded(uri: str) -> None:
    """The SQLite store at `uri` whole in its one file, as a command that wrote it leaves it when it ends
    (`sweep.record.journal`): no -wal beside it, or an empty one where another process (this test's own MLflow
    client) still has the store open. Asked before this process reads the store again."""
    wal = Path(f"{uri[len('sqlite:///') :]}-wal")
    assert not wal.exists() or wal.stat().st_size == 0, f"{wal.name} holds {wal.stat().st_size} bytes"


def session_processes(sid: int) -> list[int]:
    """Live processes of session `sid` (a command started with start_new_session=True and all it started, unless
    one left the session on purpose): empty once the command is done means no process outlived it."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] not in ("Z", "X"):  # a zombie has ended
                out.append(int(d.name))
    return out


# a sweep whose jobs with method.chunk=13 (tests.faulty.FAULTY_CHUNK) fail inside, after every check passed
FAULTY = ("method=fourier", "method._target_=tests.faulty.FaultyFourier")


def run_sweep(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run `python -m sweep ARGS` as a user would, in a process of its own (forked from one with its imports
    done: tests/forked_sweep.py); outputs go to a temp dir via cwd. The project root is on its path, so a job can
    name a test's class (FAULTY)."""
    e = forked_sweep.with_project({**os.environ, **(env or {})})
    return forked_sweep.command("sweep", list(args), cwd, e, timeout)


# every Python process started with this directory first on PYTHONPATH (the launcher's workers too)
BLOCK = "import sys\nfor m in ('sweep', 'modal', 'optuna'):\n    sys.modules[m] = None\n"


def run_plain_app(tmp_path: Path, app: str, *overrides: str) -> subprocess.CompletedProcess:
    """Run the plain Hydra script `app` (written into tmp_path) as a multirun, with only the launcher plugin on
    the path: `sweep`, `modal` and `optuna` are unimportable in every process it starts."""
    (tmp_path / "app.py").write_text(app)
    (tmp_path / "block").mkdir(exist_ok=True)
    (tmp_path / "block" / "sitecustomize.py").write_text(BLOCK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "block"), str(ROOT / "launchers")])}
    return subprocess.run(
        [
            sys.executable,
            "app.py",
            "-m",
            f"hydra.sweep.dir={tmp_path / 'multirun'}",
            "hydra/hydra_logging=disabled",
            "hydra/job_logging=disabled",
            *overrides,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# the in-process tests compose ~1,100 configs (~0.1 CPU s each through Hydra's API): the launcher's composer (its
# templates, parity-tested against Hydra: tests/test_dispatch_configs.py) makes a config of value overrides on a
# group selection it has made before in ~10 ms; one a worker
_composer: list[Any] = []


def compose(*overrides: str, hydra_section: bool = False):
    """The job config `python -m sweep OVERRIDES` would run (with its hydra section if asked: composed through
    Hydra's API, as it holds the working directory and the time)."""
    if hydra_section:
        return _compose(overrides, hydra_section=True)
    from omegaconf import open_dict

    from sweep.config.schema import register_configs

    register_configs()  # a test may have put Hydra's ConfigStore back to before it had the schemas
    for _ in range(2):
        if not _composer:
            _composer.extend(_made_composer())
        master, fast = _composer
        try:
            cfg = fast.take(master, list(overrides))[0]  # a config of its own (unpickled from the template)
        except pickle.PicklingError:
            # a test ran Hydra's plugin scan again in this worker: the launcher's config classes were re-made, and
            # a new template of the old master cannot be pickled. A composer made afresh holds the new classes.
            _composer.clear()
            continue
        with open_dict(cfg):
            del cfg["hydra"]
        return cfg
    return _compose(overrides, hydra_section=False)


def _made_composer() -> tuple[Any, Any]:
    """(the multirun master config with no overrides, the launcher's FastComposer over Hydra's loader)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from hydra.version import VersionBase

    from hydra_plugins.sweep_launcher._fast.compose import FastComposer
    from sweep.paths import CONF_DIR

    saved = VersionBase.instance().getbase()  # initialize_config_dir sets Hydra's process-global version base
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            return loader.load_configuration("config", [], RunMode.MULTIRUN), FastComposer(loader)
    finally:
        VersionBase.instance().version_base = saved


def _compose(overrides: tuple[str, ...], hydra_section: bool):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.version import VersionBase

    from sweep.config.schema import register_configs
    from sweep.paths import CONF_DIR

    register_configs()
    # initialize_config_dir sets Hydra's process-global version_base (1.3: job.chdir defaults to False);
    # Hydra's own launcher suites rely on the unset default, so put back whatever was there.
    saved = VersionBase.instance().getbase()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return hydra_compose("config", overrides=list(overrides), return_hydra_config=hydra_section)
    finally:
        VersionBase.instance().version_base = saved


@contextmanager
def fast_composer(*sweep_overrides: str) -> Iterator[tuple[Any, Any, Any]]:
    """(Hydra's config loader, the multirun's master config for `sweep_overrides`, a FastComposer over the loader),
    inside Hydra's initialize_config_dir (use with the hydra_restore_singletons fixture)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from hydra_plugins.sweep_launcher._fast.compose import FastComposer
    from sweep.config.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3", job_name="t"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", list(sweep_overrides), RunMode.MULTIRUN)
        yield loader, master, FastComposer(loader)


def record_small_sweep(uri: str, experiment: str, study: str, *overrides: str):
    """A real sweep in store `uri`: a parent run for preset `study` with gf2/km x seeds 42,43 children.
    Returns (recorder, parent run id, results); the caller ends the parent (it may add runs first)."""
    from sweep import job
    from sweep.record.recorder import Recorder

    rec = Recorder(uri, experiment)
    parent = rec.start_parent(f"sweep sweeps={study}", {"sweep.overrides": f"sweeps={study}", "launcher": "basic"})
    results = []
    for method in ("gf2", "km"):
        for seed in (42, 43):
            r = job.run(compose(f"method={method}", f"problem.seed={seed}", *overrides))
            rec.log(r, parent_run_id=parent)
            results.append(r)
    return rec, parent, results


def random_trace(rng, n_events: int, names="abcd", sizes=range(10), p_read: float = 0.6):
    """A random trace for checking a tracker against its literal definition: sizes vary per event, so buffers
    are rewritten shorter and longer than before, and read past their end."""
    from sweep.trace.trace import Trace

    t = Trace()
    for _ in range(n_events):
        (t.read if rng.random() < p_read else t.write)(rng.choice(names), rng.choice(sizes))
    return t


SESSION_DIR = "SWEEP_TEST_SESSION_DIR"  # a directory shared by the session's xdist workers (what is made once)


def pytest_configure(config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist), before any worker starts
        root = Path(tempfile.mkdtemp(prefix="sweep-tests-"))
        root.chmod(0o755)  # the shared store's PostgreSQL runs as a non-root user, which must enter it
        os.environ[SESSION_DIR] = str(root)
        # The project's modules compiled once, into their __pycache__ (git ignores it): with PYTHONDONTWRITEBYTECODE
        # set, as on the machines the suite is timed on, none is written, and each of the suite's ~450 Python
        # processes compiled the ~170 modules it imports afresh (a single run: 0.84 -> 0.71 CPU s). Read either way.
        import compileall

        for d in ("src", "launchers", "tests"):
            compileall.compile_dir(ROOT / d, quiet=1)


# The modules whose tests run longest (tens of seconds each: commands killed and re-run, servers, submitit's
# processes), longest first. They run first: xdist's worksteal gives each worker a contiguous block of the
# collection and steals from a block's end, so a long test left at the end started last and ran alone while the
# other cores idled. A module missing here costs time, never a result.
FIRST = (
    "test_submitit_launcher.py",
    "test_store_unsaved.py",
    "test_store_creation.py",
    "test_ui.py",
    "test_store_migrate.py",
    "test_store_edges.py",
    "test_server.py",
    "test_compare.py",
    "test_optuna_sweeper.py",
    "test_hints.py",
    "test_sql_run_writer.py",
    "test_launcher_stream.py",
    "test_store_check.py",
    "test_ui_browser.py",
    "test_launcher.py",
)


def pytest_collection_modifyitems(config, items) -> None:
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))  # stable: a module keeps its own order


def pytest_unconfigure(config) -> None:
    if not hasattr(config, "workerinput") and SESSION_DIR in os.environ:
        from tests.tracking_server import stop_session_store

        root = Path(os.environ.pop(SESSION_DIR))
        stop_session_store(root / "server")
        shutil.rmtree(root, ignore_errors=True)


def made_once(name: str, make: Callable[[Path], None]) -> Path:
    """`SESSION_DIR/name`, made by `make` in the first process of the session to ask (under a lock), so a costly
    fixture is made once for every xdist worker rather than once a worker."""
    root = Path(os.environ[SESSION_DIR])
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / f".{name}.done"
        if not done.exists():
            shutil.rmtree(root / name, ignore_errors=True)  # a make that failed in another worker
            (root / name).mkdir()
            make(root / name)
            done.touch()
    return root / name


@pytest.fixture(scope="session")
def shared_server():
    """One PostgreSQL cluster and MLflow tracking server with logins for the whole session and all its xdist workers
    (a start costs tens of seconds): tests keep apart by experiment name. Yields sweep.server.stack.Serving (uri,
    username, password)."""
    from tests.tracking_server import session_store

    return session_store(Path(os.environ[SESSION_DIR]) / "server")


@pytest.fixture
def server(shared_server, tmp_path, monkeypatch):
    """The session's server as this test's store: MLFLOW_TRACKING_URI and the admin's login in the environment
    (of this process and the commands it starts), a spool of its own."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", shared_server.uri)
    for k, v in shared_server.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SWEEP_SPOOL_DIR", str(tmp_path / "spool"))
    return shared_server
