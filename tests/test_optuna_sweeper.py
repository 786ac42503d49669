"""hydra/sweeper=optuna (launchers/hydra_plugins/optuna_search): trials are the launcher's jobs, recorded as child
runs with their trial number; objectives come from the runs' metrics; failed trials are told as failed; the
study lives in Optuna's sqlite storage beside the MLflow store, so re-running resumes it."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from sweep.report.compare import compare
from tests import forked_sweep
from tests.conftest import FAULTY, run_sweep

# tune_sgd at a toy size: seconds a trial
SMALL = [
    "problem.n_bits=8",
    "problem.n_train=200",
    "problem.n_test=100",
    "method.max_epochs=5",
    "hydra.sweeper.n_jobs=2",
    "hydra/launcher=local",
    "hydra.launcher.n_workers=2",
]


def _sweep(store: str, tmp_path: Path, *args: str):
    return run_sweep(*args, cwd=tmp_path, env={"MLFLOW_TRACKING_URI": store})


def _children(store: str, experiment: str) -> list:
    c = MlflowClient(store)
    exp = c.get_experiment_by_name(experiment)
    runs = c.search_runs([exp.experiment_id]) if exp else []
    return [r for r in runs if r.data.tags.get("sweep.parent") != "true"]


@pytest.mark.new_store
def test_tune_sgd_records_trials_resumes_and_draws_the_front(store, tmp_path):
    p = _sweep(store, tmp_path, "sweeps=tune_sgd", "hydra.sweeper.n_trials=2", *SMALL)
    assert p.returncode == 0, p.stderr
    storage = store.replace("mlflow.db", "optuna.db")  # Optuna's storage beside the MLflow store
    study = optuna.load_study(study_name="tune_sgd", storage=storage)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2
    children = {int(r.data.params["extra.trial"]): r for r in _children(store, "tune_sgd")}
    assert sorted(children) == [0, 1]
    for t in study.trials:  # each trial a child run: its number, its sampled values, its metrics told
        run = children[t.number]
        assert run.info.status == "FINISHED" and run.data.tags["hydra.job.num"] == str(t.number)
        assert float(run.data.params["method.lr"]) == pytest.approx(t.params["method.lr"])
        assert run.data.params["variant.name"] == t.params["variant"]
        assert t.values == [run.data.metrics["accuracy"], run.data.metrics["energy_pj"]]
    assert (tmp_path / "multirun").exists() and "Pareto front" in p.stdout

    # re-running with a larger budget resumes the study: one more trial, numbered on
    p = _sweep(store, tmp_path, "sweeps=tune_sgd", "hydra.sweeper.n_trials=3", *SMALL)
    assert p.returncode == 0, p.stderr
    # its first launch (trial 2) is the sweep's: expected from the first sweep's runs (it said nothing)
    assert re.search(r"tune_sgd: estimate \S+ for 1 job\(s\)", p.stderr), p.stderr
    study = optuna.load_study(study_name="tune_sgd", storage=storage)
    assert [t.number for t in study.trials] == [0, 1, 2]
    assert study.trials[2].params != study.trials[0].params  # the resumed sampler draws new points
    assert sorted(int(r.data.params["extra.trial"]) for r in _children(store, "tune_sgd")) == [0, 1, 2]
    # the budget is spent: nothing runs
    p = _sweep(store, tmp_path, "sweeps=tune_sgd", "hydra.sweeper.n_trials=3", *SMALL)
    assert p.returncode == 0 and "0 to run" in p.stderr + p.stdout
    assert len(_children(store, "tune_sgd")) == 3

    # compare: the study over both sweeps, its Pareto front as a table and a plot
    cmp, files = compare("tune_sgd", tracking_uri=store, out_dir=tmp_path / "cmp", log=False)
    assert len(cmp.rows) == 3 and cmp.front is not None and 1 <= len(cmp.front.rows) <= 3
    best = max(r.stats["accuracy"].mean for r in cmp.rows)
    assert cmp.front.rows[0].stats["accuracy"].mean == best  # the most accurate trial is always on the front
    assert (tmp_path / "cmp" / "tune_sgd.png").stat().st_size > 0 and (tmp_path / "cmp" / "front.md").exists()


def _search(store: str, tmp_path: Path, name: str, *args: str, seeded: bool = True):
    """An Optuna search of study and experiment `name` in its own storage beside the test's; `seeded`: Optuna's
    random sampler, seed 0."""
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    sampler = ["+hydra.sweeper.sampler._target_=optuna.samplers.RandomSampler", "+hydra.sweeper.sampler.seed=0"]
    p = _sweep(
        store,
        tmp_path,
        "-m",
        "hydra/sweeper=optuna",
        "tracker=none",
        *(sampler if seeded else []),
        f"hydra.sweeper.storage={storage}",
        f"hydra.sweeper.study_name={name}",
        f"mlflow.experiment={name}",
        *args,
    )
    return p, optuna.load_study(study_name=name, storage=storage).trials


def test_failed_trials_and_missing_objectives_are_told_failed(store, tmp_path):
    # chunk=13 raises inside the job (tests/faulty.py; random sampler, seed 0: both choices among 4 trials)
    p, trials = _search(
        store,
        tmp_path,
        "fails",
        *FAULTY,
        "method.chunk=choice(2048,13)",
        "+hydra.sweeper.objectives.accuracy=maximize",
        "hydra.sweeper.n_trials=4",
        "hydra.sweeper.trial_key=extra.trial",
    )
    assert p.returncode == 1, p.stderr  # the launcher's summary: a job failed
    states = {(t.params["method.chunk"], t.state) for t in trials}
    assert states == {(13, TrialState.FAIL), (2048, TrialState.COMPLETE)}, states
    assert len(trials) == 4 and len(_children(store, "fails")) == 4  # every trial ran, failed ones too

    gf2 = ("method=gf2", "problem.seed=1,2")
    p, trials = _search(
        store,
        tmp_path,
        "missing",
        *gf2,
        "+hydra.sweeper.objectives.epohcs=minimize",
        "hydra.sweeper.n_trials=6",
        "hydra.sweeper.n_jobs=2",
        seeded=False,
    )
    # a misspelt objective failed every trial, then exit 0 ("0 of 6 complete"): the search stops after its first
    # batch, one line naming the objective and the closest metric, exit 2
    assert p.returncode == 2, p.stderr
    assert "trial 0 failed: no metric epohcs among accuracy," in p.stdout + p.stderr  # Hydra's log: stdout
    assert p.stderr.splitlines()[-1].startswith(
        "optuna sweeper: hydra.sweeper.objectives.epohcs: no job returns a metric epohcs (did you mean epochs?); "
        "its metrics: accuracy, "
    ), p.stderr
    assert p.stderr.splitlines()[-1].endswith("; the search stopped after its first batch"), p.stderr
    assert [t.state for t in trials] == [TrialState.FAIL] * 2

    # a space of two points and a budget of 1e8 (a prober's round: it never ended): done once both have finished
    p, trials = _search(
        store,
        tmp_path,
        "two_points",
        *gf2,
        "+hydra.sweeper.objectives.accuracy=maximize",
        "hydra.sweeper.n_trials=100000000",
    )
    assert p.returncode == 0, p.stderr
    assert "the search space holds 2 point(s): the search ends once each has finished" in p.stdout + p.stderr
    assert {t.params["problem.seed"] for t in trials} == {1, 2} and len(trials) < 20, len(trials)


@pytest.mark.new_store
def test_bad_sweeper_settings_are_refused_before_any_trial(store, tmp_path):
    p = _sweep(
        store,
        tmp_path,
        "-m",
        "hydra/sweeper=optuna",
        "method=gf2",
        "problem.seed=1,2",
        "+hydra.sweeper.objectives.accuracy=biggest",
    )
    assert p.returncode == 2
    assert "hydra.sweeper.objectives.accuracy='biggest' is not allowed: expected one of maximize, minimize" in p.stderr
    assert not (tmp_path / "mlruns").exists() and _children(store, "sweep") == []
    # a fresh prober's round of issue 43: a sampler that is no node and a storage that is no URL (or cannot be
    # made) were ValueError's and SQLAlchemy's tracebacks of 33 to 141 lines
    good = ("-m", "hydra/sweeper=optuna", "method=gf2", "problem.seed=1,2")
    good += ("+hydra.sweeper.objectives.accuracy=maximize",)
    for setting, code, said in (
        ("hydra.sweeper.sampler=bogus", 2, "hydra.sweeper.sampler=bogus is not allowed: expected an optuna.samplers"),
        ("hydra.sweeper.storage=/tmp/x", 2, "hydra.sweeper.storage=/tmp/x cannot be opened (Could not parse"),
        ("hydra.sweeper.storage=sqlite:////proc/x.db", 1, "hydra.sweeper.storage=sqlite:////proc/x.db cannot be"),
    ):
        p = _sweep(store, tmp_path, *good, setting)
        assert p.returncode == code and p.stderr.splitlines() == [p.stderr.strip()], p.stderr[-3000:]
        assert p.stderr.startswith(f"optuna sweeper: {said}"), p.stderr
    assert _children(store, "sweep") == []


def test_a_space_optuna_cannot_sample_is_one_line_naming_the_key():
    """A prober's round: `interval(1,0)`, a log interval from 0 and `range(5,1,-1)` were Optuna's ValueError
    traceback (`low <= high` must hold), exit 1; each is the sweeper's line naming the key (exit 2, as its other
    refusals), and a space that can be sampled is as before."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415

    from hydra_plugins.optuna_search._space import SpaceError, distribution  # noqa: PLC0415

    parser = OverridesParser.create()
    for value, rule in (
        ("interval(1,0)", "expected low <= high"),
        ("tag(log,interval(0,1))", "expected low > 0 and low <= high (a log scale)"),
        ("range(5,1,-1)", "expected low <= high, a step > 0 (a search draws in its own order)"),
        ("range(5,5)", "expected low <= high, a step > 0 (a search draws in its own order)"),
    ):
        with pytest.raises(SpaceError) as e:
            distribution(parser.parse_override(f"method.lr={value}"))
        assert str(e.value) == f"method.lr: '{value}' is no space Optuna can sample: {rule}", str(e.value)
    assert distribution(parser.parse_override("method.hidden=range(10,20,5)")).high == 15
    assert distribution(parser.parse_override("method.lr=tag(log,interval(0.01,1))")).log


def _parent_opened(store: str) -> bool:
    """Whether the store has a sweep's parent run, read without creating the store (the sweep does that)."""
    try:
        with sqlite3.connect(f"file:{store[len('sqlite:///') :]}?mode=ro", uri=True) as db:
            return bool(db.execute("SELECT 1 FROM tags WHERE key = 'sweep.parent'").fetchone())
    except sqlite3.OperationalError:  # not created yet
        return False


def test_an_interrupted_search_runs_its_unfinished_trials_first_when_resumed(store, tmp_path):
    storage = store.replace("mlflow.db", "optuna.db")
    fixed = ["sweeps=tune_sgd", "method.lr=1e-6", "hydra.sweeper.n_trials=2", *SMALL]  # lr fixed: never converges
    # Ctrl-C while the first batch's trials run (100000 epochs: still running when it comes)
    env = forked_sweep.with_project({**os.environ, "MLFLOW_TRACKING_URI": store})
    proc = forked_sweep.popen([*fixed, "method.max_epochs=100000", "tracker=none"], tmp_path, env, session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not _parent_opened(store):
        time.sleep(0.2)
    time.sleep(2.0)  # the launcher opened the sweep's parent run: its jobs are starting
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    client = MlflowClient(store)
    study = optuna.load_study(study_name="tune_sgd", storage=storage)
    assert [t.state for t in study.trials] == [TrialState.RUNNING] * 2
    interrupted = sorted(tuple(sorted(t.params.items())) for t in study.trials)

    # re-running: the two interrupted trials are failed and asked again first, with the same values
    p = _sweep(store, tmp_path, *fixed)
    assert p.returncode == 0, p.stderr
    trials = optuna.load_study(study_name="tune_sgd", storage=storage).trials
    assert [t.state for t in trials] == [TrialState.FAIL] * 2 + [TrialState.COMPLETE] * 2
    assert sorted(tuple(sorted(t.params.items())) for t in trials[2:]) == interrupted
    parents = [
        r
        for r in client.search_runs(
            [client.get_experiment_by_name("tune_sgd").experiment_id], order_by=["attributes.start_time ASC"]
        )
        if r.data.tags.get("sweep.parent") == "true"
    ]
    assert [r.info.status for r in parents] == ["KILLED", "FINISHED"]


def test_a_search_into_a_second_store_in_the_same_folder_is_its_own_study(tmp_path):
    """A newcomer's tune_sgd into `b.db` beside `a.db` (or into the group's server after the local store) said
    "4 trial(s) done, 0 to run of n_trials=4" and recorded nothing: every store's study was one `optuna.db`. Each
    store has its own now (sweep.paths.store_sibling), `mlflow.db`'s still `optuna.db`."""
    from sweep.paths import STORE_DIR, store_sibling

    for name in ("a", "b"):
        store = f"sqlite:///{tmp_path / name}.db"
        args = ("sweeps=tune_sgd", "hydra.sweeper.n_trials=4", *SMALL, f"mlflow.tracking_uri={store}")
        p = _sweep(store, tmp_path, *args)
        assert p.returncode == 0 and "0 trial(s) done, 4 to run" in p.stdout + p.stderr, p.stdout + p.stderr
        assert len(_children(store, "tune_sgd")) == 4
        # two launches of 2 trials: the second, expected from the first's runs, said "estimate <1s for 2 job(s)";
        # the first, into a new store, says it has none
        said = [ln for ln in p.stderr.splitlines() if "estimate" in ln]
        assert len(said) == 1 and said[0].endswith("none ran here before: no estimate until the first ends (then "
                                                   "the ETA)"), p.stderr  # fmt: skip
        # and its progress counts the search, not each launch ("tune_sgd 2/2 · 2 done" after each of them)
        progress = [ln.split(" · ")[:2] for ln in p.stderr.splitlines() if ln.startswith("tune_sgd ")]
        assert progress == [["tune_sgd 2/4", "2 done"], ["tune_sgd 4/4", "4 done"]], p.stderr
        assert (tmp_path / f"{name}-optuna.db").exists()
    # its study lost, the same search draws its 4 trials again (seeded), each skipped as done, then 2 new ones: the
    # progress counts the jobs it runs, as a grid's does ("tune_sgd 2/6" was its last line)
    (tmp_path / "a-optuna.db").unlink()
    p = _sweep(store := f"sqlite:///{tmp_path / 'a'}.db", tmp_path, *args[:1], "hydra.sweeper.n_trials=6", *SMALL,
               f"mlflow.tracking_uri={store}")  # fmt: skip
    assert "4 skipped" in p.stdout + p.stderr, p.stdout + p.stderr
    progress = [ln.split(" · ")[0] for ln in p.stderr.splitlines() if ln.startswith("tune_sgd ")]
    assert progress == ["tune_sgd 1/2", "tune_sgd 2/2"] or progress == ["tune_sgd 2/2"], p.stderr
    assert store_sibling("optuna.db", f"sqlite:///{tmp_path}/mlflow.db") == f"sqlite:///{tmp_path}/optuna.db"
    server = store_sibling("optuna.db", "postgresql+psycopg://alice:secret@db.lab:5432/mlflow")
    assert server == f"sqlite:///{STORE_DIR}/db.lab_5432_mlflow-optuna.db"  # no password in a file name


def test_a_finite_space_ends_once_each_of_its_own_points_has_finished():
    """A study resumed with a wider space (`method.hidden` added to `method.lr`): the earlier trials' points are no
    points of it, and counting them ended the search with 2 of its 4 points run."""
    import optuna.distributions as od  # noqa: PLC0415
    from optuna.trial import create_trial  # noqa: PLC0415

    from hydra_plugins.optuna_search.sweeper import OptunaSweeper  # noqa: PLC0415

    lr = {"method.lr": od.CategoricalDistribution([0.1, 0.2])}
    space = {**lr, "method.hidden": od.IntDistribution(8, 16, step=8)}
    study = optuna.create_study()
    for params, dists in (
        ({"method.lr": 0.1}, lr),
        ({"method.lr": 0.2}, lr),
        ({"method.lr": 0.1, "method.hidden": 8}, space),
        ({"method.lr": 0.1, "method.hidden": 16}, space),
        ({"method.lr": 0.1, "method.hidden": 16}, space),  # a point finished twice is one point
    ):
        study.add_trial(create_trial(params=params, distributions=dists, value=1.0))
    assert OptunaSweeper._finished_points(study, space) == 2
    assert OptunaSweeper._finished_points(study, lr) == 2  # its own points, whatever else the study holds


def test_one_server_written_two_ways_keeps_one_study():
    """`http://host:5000/` and `http://HOST:5000` name the same tracking server as `http://host:5000`: a second file
    for either let a search resumed under it run its study again from trial 0."""
    from sweep.paths import store_sibling  # noqa: PLC0415

    one = store_sibling("optuna.db", "http://mlflow-host:5000")
    assert one.endswith("/mlflow-host_5000-optuna.db"), one  # as docs/search.md names it
    for same in ("http://mlflow-host:5000/", "http://MLflow-Host:5000", "https://u:p@mlflow-host:5000/"):
        assert store_sibling("optuna.db", same) == one, same
