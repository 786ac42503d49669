"""Stored traces and `sweep-rescore`: a tracker computed afterwards for a recorded study, from the traces its runs
kept, equals what running the study with that tracker gives, run by run, on a real MLflow store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from sweep import job
from sweep.batch.run import run_batch
from sweep.record.recorder import Recorder
from sweep.record.sqlalchemy_writer import SqlRunWriter
from sweep.record.tags import TRACKER_VERSION_TAG
from sweep.rescore.__main__ import main
from sweep.rescore.runs import TABLE
from sweep.trace import stored
from tests import forked_sweep
from tests.conftest import compose

SMALL = ("method.hidden=16", "problem.n_train=96")
STUDY = [
    (*SMALL, "problem.seed=42"),  # the published step
    (*SMALL, "problem.seed=43", "tracker.scope=all_steps", "method.max_epochs=3", "method.target_accuracy=1.0"),
    ("method=km", "problem.n_bits=12"),
    ("method=gf2", "problem.n_bits=12"),
    (*SMALL, "problem.seed=46", "tracker.source=auto"),  # a trace recorded from the array operations themselves
]
BATCHED = [(*SMALL, f"problem.seed={s}") for s in (44, 45)]  # solved together (sweep.batch.run)
FIGURES = ("ard", "reads", "writes", "total_floats", "dmc", "bytedmd")


def record(uri: str, experiment: str, tracker: str) -> list:
    """The study with `tracker`, its runs written by each of the recorder's paths in turn: sqlite3 (a SQLite store),
    SQLAlchemy's one transaction (PostgreSQL's) and MLflow's client (a tracking server's); the batched runs too."""
    rec = Recorder(uri, experiment)
    writers = [rec.sql, SqlRunWriter.for_client(rec.client), None]
    results = [job.run(compose(f"tracker={tracker}", *o)) for o in STUDY]
    results += run_batch([compose(f"tracker={tracker}", *o) for o in BATCHED])
    for i, r in enumerate(results):
        assert not isinstance(r, BaseException), r
        rec.sql = writers[i % len(writers)]
        rec.log(r)
    rec.sql = writers[0]
    return results


def history(client, run_id: str, key: str) -> list[float]:
    """A curve as the run shows it: the latest value at each step (a figure the run had is logged again)."""
    latest = {m.step: m.value for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.timestamp)}
    return [latest[s] for s in sorted(latest)]


def test_a_recorded_study_scored_again_equals_the_study_run_with_that_tracker(store, capsys):
    from mlflow.tracking import MlflowClient

    before = record(store, "before", "ard")
    fresh = record(store, "fresh", "bytedmd")
    assert "bytedmd" not in before[0].metrics and before[-1].tags["sweep.batch.size"] == "2"
    assert main(["before", "tracker=bytedmd", "--tracking-uri", store]) == 0
    out = capsys.readouterr().out
    assert f"{len(before)} of {len(before)} run(s) scored with tracker=bytedmd (version 1)" in out
    client = MlflowClient(store)
    for old, new in zip(before, fresh):
        run = client.get_run(old.run_id)
        assert {k: run.data.metrics[k] for k in FIGURES} == {k: new.metrics[k] for k in FIGURES}
        curves = [k for k in new.curves if k.endswith("_per_epoch")]
        assert ("bytedmd_per_epoch" in curves) == (new.config["tracker"]["scope"] == "all_steps")
        for key in curves:
            assert history(client, old.run_id, key) == new.curves[key]
        tags = run.data.tags
        assert tags[TRACKER_VERSION_TAG + "bytedmd"] == "1" and tags[TRACKER_VERSION_TAG + "ard"] == "1"
        table = client.download_artifacts(old.run_id, TABLE.format(tracker="bytedmd"), str(store_dir(store)))
        assert open(table, newline="").read() == new.artifacts["tracker_buffers.csv"]
        # the trace each writer stored is the run's own
        assert (
            client.download_artifacts(old.run_id, stored.ARTIFACT, str(store_dir(store)))
            and old.artifacts[stored.ARTIFACT] == open(os.path.join(store_dir(store), stored.ARTIFACT)).read()
        )


def store_dir(uri: str):
    from sweep.record.store import sqlite_path

    return sqlite_path(uri).parent


def test_the_stored_trace_is_the_runs_trace():
    cfg = compose("tracker=dmd", *STUDY[1])
    config, j = job.prepare(cfg)
    solved = job.solve(j, cfg.device)
    trace, pieces, steps = stored.loads(stored.dumps(j.ctx.trace, solved.outcome.traces))
    assert steps == 0  # the pieces are epochs (a character model's run keeps its steps: tests/test_chars.py)
    assert (trace.templates, trace.seq, trace.compute_ops) == (
        j.ctx.trace.templates,
        j.ctx.trace.seq,
        j.ctx.trace.compute_ops,
    )
    assert list(pieces) == list(solved.outcome.traces) == ["epoch_1", "epoch_2", "epoch_3"]
    for got, want in zip(pieces.values(), solved.outcome.traces.values()):
        assert got.events == want.events and got.compute_ops == want.compute_ops
    with pytest.raises(ValueError, match="format 99"):
        stored.loads('{"format": 99}')


def test_bad_input_writes_nothing_and_runs_without_a_trace_are_named(store, capsys, tmp_path):
    rec = Recorder(store, "mixed")
    traced, untraced = (job.run(compose(f"tracker={t}", *STUDY[0])) for t in ("ard", "none"))
    rec.log(traced), rec.log(untraced)
    assert stored.ARTIFACT not in untraced.artifacts
    for args, said in (
        (
            ["tracker=bytdmd"],
            "tracker=bytdmd is not allowed: expected one of ard, bytedmd, cache, dmd, energy (did you mean bytedmd?)",
        ),
        (["tracker=bytedmd", "tracker.bytes_per_elemnt=2"], "did you mean bytes_per_element?"),
        (["tracker=DMD"], "expected one of ard, bytedmd, cache, dmd, energy (did you mean dmd?)"),  # (capitals: none)
        (["tracker=bytedmd", "tracker.bytes_per_element=0"], "tracker.bytes_per_element=0 is not allowed"),
        (["tracker=dmd", "tracker.scope=all_steps"], "tracker.scope: a recorded run's trace is what it was run with"),
        (["tracker=dmd", "tracker.source=auto"], "tracker.source: a recorded run's trace is what it was run with"),
        (["tracker=dmd", "method=km"], "takes tracker=<name> and tracker.<key>=<value> only"),
        # a prober's round of issue 43: no tracker was "tracker=? is not allowed"; a repeated key, the last silently
        ([], "name the tracker to score with, tracker=<name>: one of ard, "),
        (["tracker=dmd", "tracker=cache"], "tracker is given twice (tracker=dmd, tracker=cache): give it once"),
        # a fresh prober's round: a key after an option was "unrecognized arguments: tracker.source=auto"
        (["tracker=dmd", "--tracking-uri", store, "tracker.source=auto"], "tracker.source: a recorded run's trace"),
        # a ninth prober's round: OmegaConf's words ("Error merging override ...: Value 'True' of type 'bool' could
        # not be converted to Integer"), a bool field's 2 read as true, a sweep told to add -m, which this takes not
        (
            ["tracker=bytedmd", "tracker.bytes_per_element=true"],
            "tracker.bytes_per_element=true is not allowed: expected an integer",
        ),
        (["tracker=energy", "tracker.profile=2"], "tracker.profile=2 is not allowed: expected true or false"),
        (
            ["tracker=cache", "tracker.cache_size_floats=1,2"],
            "tracker.cache_size_floats=1,2 is a sweep over values: "
            "sweep-rescore scores with one value a key, a command each",
        ),
    ):
        assert main(["mixed", *args, "--tracking-uri", store]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1
    # an address no store is at is refused as compare refuses it (a file: address was MLflow's traceback, an
    # in-memory or missing store was made, directories and all, then searched); a missing store is not made
    missing = tmp_path / "no" / "mlflow.db"
    for uri, code, said in (
        ("sqlite://", 2, "an in-memory SQLite store keeps nothing"),
        (f"file://{tmp_path}", 2, "a directory or file: address (MLflow's file store"),
        (f"sqlite:///{missing}", 2, "no store there (nothing has been recorded into it)"),
    ):
        assert main(["mixed", "tracker=dmd", "--tracking-uri", uri]) == code
        err = capsys.readouterr().err
        assert f"sweep-rescore: store {uri}: " in err and said in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "no").exists()
    assert main(["mixd", "tracker=dmd", "--tracking-uri", store]) == 2
    assert "no experiment or run 'mixd' in the store: experiments Default, mixed (did you mean mixed?)" in (
        capsys.readouterr().err
    )
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    assert "dmd" not in client.get_run(traced.run_id).data.metrics  # nothing written by the refused commands
    assert main(["mixed", "tracker=dmd", "--tracking-uri", store]) == 1
    captured = capsys.readouterr()
    assert f"({untraced.run_id}): no trace.json (recorded with tracker=none" in captured.err
    assert "1 of 2 run(s) scored" in captured.out
    assert (
        client.get_run(traced.run_id).data.metrics["dmd"] == job.run(compose("tracker=dmd", *STUDY[0])).metrics["dmd"]
    )
    assert main([traced.run_id, "tracker=dmd", "--tracking-uri", store]) == 0  # by run id; scoring again is harmless
    # a damaged trace (`{"format":1}` alone aborted the command with "sweep-rescore: 'buffers'"; a huge run-length
    # was a MemoryError traceback): the run named with what is wrong, one line, the others scored, exit 1
    capsys.readouterr()
    good = stored.loads(traced.artifacts[stored.ARTIFACT])[0]
    huge = stored.dumps(good).replace('"seq":[0,1', f'"seq":[0,{10**15}', 1)
    # a prober's round: a negative size or buffer, compute counts that are none, a count of steps without the two
    # pieces it needs (was "sweep-rescore: list index out of range", exit 2, no run named, the others not scored)
    doc = json.loads(stored.dumps(good))
    negative = json.dumps({**doc, "templates": [[doc["templates"][0][0], 1, -5, *doc["templates"][0][3:]]]})
    no_counts = json.dumps({**doc, "trace": {**doc["trace"], "compute": {"mul": "x"}}})
    no_pieces = json.dumps({**doc, "steps": 10**30})
    damaged = {}
    for text in ('{"format":1}', huge, negative, no_counts, no_pieces):
        r = job.run(compose("tracker=ard", *STUDY[0]))
        rec.log(r)
        client.log_text(r.run_id, text, stored.ARTIFACT)
        damaged[r.run_id] = text
    assert main(["mixed", "tracker=cache", "--tracking-uri", store]) == 1
    captured = capsys.readouterr()
    assert "1 of 7 run(s) scored with tracker=cache" in captured.out
    # issue 43, seventh round: the run's line said "scored", no figure (tracker=cache's is cache_hit_rate)
    assert f"({traced.run_id}): cache_hit_rate=" in captured.out, captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 6 and "Traceback" not in captured.err, captured.err
    said = {rid: next(line for line in lines if rid in line) for rid in damaged}
    first, second, third, fourth, fifth = damaged
    assert said[first].endswith(f"({first}): trace.json: no 'buffers' entry, which format 1 has"), said[first]
    assert "repeats a step 1,000,000,000,000,000 times" in said[second], said[second]
    assert f"trace.json: an event [{doc['templates'][0][0]}, 1, -5] is not (a buffer of the " in said[third]
    assert "trace.json: its compute counts are not counts of fma, add, " in said[fourth], said[fourth]
    assert "trace.json: steps=1000000000000000000000000000000 with 0 piece(s): a run measured by " in said[fifth]
    assert "cache_hits" in client.get_run(traced.run_id).data.metrics


@pytest.mark.slow
def test_rescore_through_a_tracking_server(server):
    # the group's store: MLflow's tracking server with logins over PostgreSQL, written and read through its client;
    # the console script as a user runs it
    experiment = f"rescore-{uuid.uuid4().hex[:8]}"
    r = job.run(compose("tracker=ard", *STUDY[1]))
    Recorder(server.uri, experiment).log(r)
    script = os.path.join(os.path.dirname(sys.executable), "sweep-rescore")
    done = subprocess.run(
        [script, experiment, "tracker=bytedmd", "tracker.bytes_per_element=4"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    from mlflow.tracking import MlflowClient

    fresh = job.run(compose("tracker=bytedmd", "tracker.bytes_per_element=4", *STUDY[1]))
    client = MlflowClient(server.uri)
    assert client.get_run(r.run_id).data.metrics["bytedmd"] == fresh.metrics["bytedmd"]
    assert history(client, r.run_id, "bytedmd_per_epoch") == fresh.curves["bytedmd_per_epoch"]


def test_a_sweeps_parent_run_names_its_children(store, capsys):
    from mlflow.tracking import MlflowClient

    from tests.conftest import record_small_sweep

    rec, parent, results = record_small_sweep(store, "study", "s1", "tracker=ard", "problem.n_bits=12")
    rec.end_parent(parent, "FINISHED", results)
    assert main([parent, "tracker=dmd", "--tracking-uri", store]) == 0
    assert "4 of 4 run(s) scored with tracker=dmd" in capsys.readouterr().out
    client = MlflowClient(store)
    assert all("dmd" in client.get_run(r.run_id).data.metrics for r in results)
    assert "dmd" not in client.get_run(parent).data.metrics  # the parent has no trace of its own
    # run again (as after a stop mid-way): nothing is logged twice (each metric's history was doubled)
    assert main([parent, "tracker=dmd", "--tracking-uri", store]) == 0
    out = capsys.readouterr().out
    assert "4 of 4 run(s) scored with tracker=dmd" in out and out.count("nothing logged again") == 4, out
    assert all(len(client.get_metric_history(r.run_id, "dmd")) == 1 for r in results)
    # nor by the first: the figures the run had from tracker=ard (ard, reads, ...) were each logged a second time
    for r in results:
        shared = [k for k in ("ard", "reads", "writes", "dmc") if k in r.metrics]
        assert shared and all(len(client.get_metric_history(r.run_id, k)) == 1 for k in shared), shared


def test_ctrl_c_while_scoring_is_one_line_naming_what_was_scored(store, capsys, monkeypatch):
    """A prober's round of issue 43: Ctrl-C during sweep-rescore (or sweep-compare) was Python's 40-60 line
    KeyboardInterrupt traceback. Python's handler raises KeyboardInterrupt where the command is: here, as the
    second run is read (the first scored), and as compare reads its study."""
    from sweep.compare import __main__ as compare_main  # noqa: PLC0415
    from sweep.rescore import runs  # noqa: PLC0415

    rec = Recorder(store, "two")
    for seed in (42, 43):
        rec.log(job.run(compose("method=gf2", "problem.n_bits=12", f"problem.seed={seed}")))
    real, calls = runs.score, []

    def interrupted_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runs, "score", interrupted_second)
    assert main(["two", "tracker=dmd", "--tracking-uri", store]) == 130
    err = capsys.readouterr().err
    assert err == "sweep-rescore: interrupted by Ctrl-C: 1 run(s) scored before; run it again to score all\n", err

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    # SIGTERM, as a real signal to the command, once it has scored a run: it ended with no line
    for seed in range(44, 56):
        rec.log(job.run(compose("method=gf2", "problem.n_bits=12", f"problem.seed={seed}")))
    env = forked_sweep.with_project(dict(os.environ))
    proc = forked_sweep.popen(["two", "tracker=dmd", "--tracking-uri", store], None, env, "sweep.rescore")
    assert forked_sweep.readline(proc)  # the first run scored
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err.count("\n") == 1, err
    assert err.startswith("python -m sweep.rescore: interrupted by SIGTERM: ") and " scored before; " in err, err

    monkeypatch.setattr(compare_main, "store_main", interrupted)
    assert compare_main.main(["two", "--tracking-uri", store]) == 130
    err = capsys.readouterr().err
    assert err == "sweep-compare: interrupted by Ctrl-C: its table and plots may be partial; run it again\n", err

    def terminated(*args, **kwargs):  # a real SIGTERM as compare reads: it ended the command with no line
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        return 0

    monkeypatch.setattr(compare_main, "store_main", terminated)
    before = signal.getsignal(signal.SIGTERM)
    assert compare_main.main(["two", "--tracking-uri", store]) == 143
    err = capsys.readouterr().err
    assert err == "sweep-compare: interrupted by SIGTERM: its table and plots may be partial; run it again\n", err
    assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler is back


def test_a_closed_output_ends_each_command_silently_with_141(store, capsys, monkeypatch, tmp_path):
    """A prober's round of issue 43: `sweep-compare X | head -1` exited 1, silently (rich's answer to a closed
    output), which says the command failed; `sweep-rescore ... | head -1` said the store failed ("store ...: [Errno
    32] Broken pipe", exit 1); `sweep-spool list | head` and `sweep --help | head` were BrokenPipeError tracebacks.
    Each now ends as a shell's writer that SIGPIPE ended, as `git log | head` does: 141, and only rescore (which
    writes) says on stderr what it had scored. The reader's end is closed before the command writes."""
    from sweep import spool  # noqa: PLC0415
    from sweep.compare import __main__ as compare_main  # noqa: PLC0415
    from tests.conftest import record_small_sweep  # noqa: PLC0415

    rec, parent, results = record_small_sweep(store, "piped", "s1", "tracker=ard", "problem.n_bits=12")
    rec.end_parent(parent, "FINISHED", results)

    def closed_stdout() -> None:
        r, w = os.pipe()
        os.close(r)
        monkeypatch.setattr(sys, "stdout", os.fdopen(w, "w", buffering=1))

    closed_stdout()
    assert compare_main.main(["piped", "--tracking-uri", store, "--no-log", "--out", str(tmp_path / "c")]) == 141
    assert capsys.readouterr().err == ""
    assert (tmp_path / "c" / "table.md").is_file()  # written before the table was shown
    closed_stdout()
    assert main(["piped", "tracker=dmd", "--tracking-uri", store]) == 141
    err = capsys.readouterr().err
    assert err == (
        "sweep-rescore: interrupted by a closed output (SIGPIPE: the reader of its output ended): 1 run(s) scored "
        "before; run it again to score all\n"
    ), err
    closed_stdout()
    monkeypatch.setenv("SWEEP_SPOOL_DIR", str(tmp_path / "spool"))
    assert spool.main(["list"]) == 141 and capsys.readouterr().err == ""
    for flag in ("--help", "--info"):  # Hydra's --info logs its report: 99 "--- Logging error ---" tracebacks, exit 0
        r, w = os.pipe()
        os.close(r)
        try:
            p = subprocess.run([sys.executable, "-m", "sweep", flag], stdout=w, stderr=subprocess.PIPE, text=True)
        finally:
            os.close(w)
        assert (p.returncode, p.stderr) == (141, ""), (flag, p.stderr[-500:])


def test_only_figures_the_run_lacks_or_holds_otherwise_are_logged():
    """A figure at the run's own value is not logged again (NaN, a diverged run's, included: NaN != NaN logged it at
    every rescore); a new one, or one at another value, is; a curve by its last value."""
    from types import SimpleNamespace

    from sweep.rescore.runs import Scored, _metrics
    from sweep.trace.report import TrackerReport

    nan = float("nan")
    run = SimpleNamespace(data=SimpleNamespace(metrics={"ard": 5.0, "loss": nan, "dmd": 1.0, "c": 3.0}))
    report = TrackerReport(metrics={"ard": 5.0, "loss": nan, "dmd": 2.0, "bytedmd": 7.0})
    held = {"c": {1: 1.0, 2: 3.0}}
    logged = list(_metrics(Scored(run, report, {"c": [1.0, 3.0], "d": [4.0]}), now=1, history=held.__getitem__))
    assert [(k, v, step) for k, v, _, step in logged] == [("dmd", 2.0, 0), ("bytedmd", 7.0, 0), ("d", 4.0, 1)]


def test_runs_not_scored_for_one_reason_are_one_line():
    """A newcomer's first hour: `sweep-rescore sign_vs_sgd tracker=dmd` (a study recorded with tracker=none) said
    "not scored: ... no trace.json (recorded with tracker=none, ...)" 18 times, once a run."""
    from sweep.rescore.__main__ import unscored

    why = "no trace.json (recorded with tracker=none, or before runs kept traces)"
    left = [(f"seed={s} (r{s})", why) for s in range(18)] + [("odd (x)", "trace.json: no 'buffers' entry")]
    assert unscored(left) == [
        f"18 runs: {why}: seed=0 (r0), seed=1 (r1), seed=2 (r2) and 15 more",
        "odd (x): trace.json: no 'buffers' entry",
    ]


def test_a_rescore_killed_mid_way_then_run_again_leaves_each_curve_whole_and_once(store, capsys):
    """Task fault11 of issue 43: sweep-rescore SIGKILLed between two of a run's metric batches left a curve's first
    steps; the re-run judged the curve by its last value, and a per-epoch cost the same each epoch (sgd that has
    not learnt yet) was taken as there: the run was tagged scored with the curve's later steps missing, for good
    (a curve whose last value differed was logged again whole, its first steps twice). Killed at the version tag,
    the re-run logs nothing twice."""
    from mlflow.tracking import MlflowClient

    result = job.run(compose(*SMALL, "tracker.scope=all_steps", "method.max_epochs=4", "method.lr=0.0001"))
    Recorder(store, "killed").log(result)
    assert result.metrics["epochs"] == 4
    client = MlflowClient(store)
    for tracker, at in (("bytedmd", "batch2"), ("dmd", "tag")):
        argv = [at, "killed", f"tracker={tracker}", "--tracking-uri", store]
        killed = forked_sweep.command(
            "tests.rescore_killed", argv, None, forked_sweep.with_project(dict(os.environ)), 120
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        run = client.get_run(result.run_id)
        assert TRACKER_VERSION_TAG + tracker not in run.data.tags
        assert main(["killed", f"tracker={tracker}", "--tracking-uri", store]) == 0
        assert "1 of 1 run(s) scored" in capsys.readouterr().out
        for key in (tracker, f"{tracker}_per_epoch", "ard", "ard_per_epoch", "dmc_per_epoch"):
            points = client.get_metric_history(result.run_id, key)
            steps = sorted(m.step for m in points)
            assert steps == ([0] if key in (tracker, "ard") else [1, 2, 3, 4]), (tracker, key, steps)
        assert client.get_run(result.run_id).data.tags[TRACKER_VERSION_TAG + tracker] == "1"


def test_two_rescores_at_once_on_one_store_log_each_figure_once(store, capsys):
    """Task fault11 of issue 43: two `sweep-rescore ... tracker=cache` started together on one store each read the
    runs before the other wrote, and every point of every figure was logged twice (5 of 5 runs). One at a time
    now: while one holds the store, another is one line, exit 1, nothing logged."""
    from mlflow.tracking import MlflowClient

    from sweep.record.exclusive import exclusive

    rec = Recorder(store, "twice")
    runs = [
        rec.log(job.run(compose(*SMALL, f"problem.seed={s}", "tracker.scope=all_steps", "method.max_epochs=3")))
        for s in (1, 2)
    ]
    with exclusive(store, "sweep-rescore"):
        assert main(["twice", "tracker=cache", "--tracking-uri", store]) == 1
    assert capsys.readouterr().err == (
        f"sweep-rescore: store {store}: another sweep-rescore into this store is running on this machine: run this "
        "one when it ends\n"
    )
    client = MlflowClient(store)
    assert not any("cache_hits" in client.get_run(r).data.metrics for r in runs)
    command, env = ["twice", "tracker=cache", "--tracking-uri", store], forked_sweep.with_project(dict(os.environ))
    both = [forked_sweep.popen(command, None, env, "sweep.rescore") for _ in range(2)]
    said = [p.communicate(timeout=120) for p in both]
    assert sorted(p.returncode for p in both) in ([0, 0], [0, 1]), said
    for run_id in runs:
        for key in ("cache_hits", "cache_hits_per_epoch"):
            steps = [m.step for m in client.get_metric_history(run_id, key)]
            assert len(steps) == len(set(steps)) > 0, (key, steps)
