"""The progress line reads number before label (`tiled_w1 3/30 · 3 done · ...`), its ETA, and the line a sweep
ends with (where to look next); `hydra.launcher.progress=false` prints none of the progress."""

from __future__ import annotations

import re
import statistics

from mlflow.tracking import MlflowClient

from hydra_plugins.sweep_launcher._progress import Progress, duration
from tests.conftest import run_sweep


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Job:
    def __init__(self, idx: int) -> None:
        self.idx = idx


def test_plain_line_numbers_before_labels_and_eta_from_the_jobs_seconds_not_the_start_up(capsys):
    clock = Clock()
    p = Progress(30, title="tiled_w1", clock=clock, slots=2)  # stderr is not a terminal here: the plain line
    assert p.line() == "tiled_w1 0/30 · 0 done · 0 failed · 0 running · ETA ?"
    with p:
        clock.t += 60.0  # the workers' start-up: the pace so far (elapsed / finished) would say 27 x 24 s = 10m48s
        for i in range(3):
            clock.t += 4.0
            p.job_done(Job(i), ok=i != 1, line=f"job {i}", seconds=8.0)
        p.running_now(2)
        assert p.eta_s() == 108.0  # 27 jobs left of 8 s each, 2 at a time
        p.refresh()
    out, err = capsys.readouterr()
    assert out.splitlines() == ["job 0", "job 2"] and "job 1" in err  # a failed job's line goes to stderr
    line = "tiled_w1 3/30 · 2 done · 1 failed · 2 running · ETA 1m48s"
    assert err.splitlines().count(line) == 1  # every 5 s, and once at the end (not twice for the same state)
    assert [duration(s) for s in (0, 0.4, 53, 245, 7620)] == ["0s", "<1s", "53s", "4m05s", "2h07m"]


def test_an_expected_sweep_starts_with_its_estimate_and_its_eta_learns_from_what_was_expected(capsys):
    """Issue 43: a preset gave no estimate up front. Seconds the hooks expect of the jobs (their earlier runs'):
    an estimate line at the start; then the ETA scales them by how the finished jobs compared."""
    clock = Clock()
    with Progress(5, title="w1", clock=clock, slots=2, expected={0: 10.0, 1: 10.0, 2: 30.0, 3: 30.0}) as p:
        # 10 + 10 + 30 + 30 expected, and the fifth job at their mean (20 s): 100 s on 2 slots
        assert p.eta_s() == 50.0
        p.job_done(Job(0), ok=True, line="job 0", seconds=5.0)  # half what was expected, of 1/8 of the work
        assert p.eta_s() == (0.9375 * 70.0 + 5.0) / 2  # the rest at 1 - 1/2 x 1/8; the unexpected one at 5 s
        for i in (1, 2, 3):  # all expected work done, at half: the fifth, expected of none, at their mean
            p.job_done(Job(i), ok=True, line=f"job {i}", seconds=p.expected[i] / 2)
        assert p.eta_s() == 10.0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (  # the fifth, expected of none, is not guessed at up front
        "w1: estimate 40s for 4 of the 5 job(s), from the seconds earlier runs of them took; the other 1 never ran "
        "here: no estimate for them"
    )


def test_jobs_that_never_ran_are_left_out_of_the_estimate_and_it_says_so(capsys):
    """A newcomer's first hour: `sweep -m problem=chars method=bigram,mlp_lm,gpt ...` said "estimate <1s for 2
    job(s)": the mlp_lm job, never run, was counted at the bigram's 0.2 s (and expected the experiment's median,
    gf2's and km's milliseconds). The estimate is of the jobs that ran before, and says how many it leaves out."""
    with Progress(3, title="sweep", clock=Clock(), slots=2, expected={0: 0.2, 2: 40.0}):
        pass
    assert capsys.readouterr().err.splitlines()[0] == (
        "sweep: estimate 20s for 2 of the 3 job(s), from the seconds earlier runs of them took; "
        "the other 1 never ran here: no estimate for them"
    )


def test_a_sweep_none_of_whose_jobs_ran_before_says_it_has_no_estimate_yet(capsys):
    """A newcomer's first hour: a preset's first run into a new store (`sweep sweeps=tiled_w1`, 78 jobs) said
    nothing of its length until its first job ended."""
    clock = Clock()
    with Progress(78, title="tiled_w1", clock=clock, slots=2) as p:
        clock.t += 2.0
        p.job_done(Job(0), ok=True, line="job 0", seconds=2.0)
        assert p.eta() == "1m17s"  # then the ETA: 77 jobs at the first one's 2 s, 2 at a time
    assert capsys.readouterr().err.splitlines()[0] == (
        "tiled_w1: 78 job(s) on 2 worker slot(s); none ran here before: no estimate until the first ends (then the ETA)"
    )


def test_progress_false_prints_job_lines_only(capsys):
    clock = Clock()
    with Progress(2, enabled=False, clock=clock) as p:
        p.job_done(Job(0), ok=True, line="job 0")
        clock.t += 60
        p.refresh()
    out, err = capsys.readouterr()
    assert out == "job 0\n" and err == ""


def test_a_sweep_ends_with_its_progress_then_where_to_look_next(store, tmp_path):
    args = ["-m", "method=gf2", "problem.seed=1,2", "problem.n_bits=10", "tracker=none", "mlflow.experiment=prog"]
    p = run_sweep(*args, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert re.search(r"^prog 2/2 · 2 done · 0 failed · 0 running · ETA 0s$", p.stderr, re.M), p.stderr
    last = p.stdout.strip().splitlines()[-1]
    # the commands as they run pasted from here (tests/test_hints.py runs them)
    assert re.match(r"next: \S*sweep-compare prog  ·  \S*sweep-ui prog  →  http://127\.0\.0\.1:5000/#/", last), last
    # issue 43: no estimate up front. Now the study's earlier runs give one: seed 3 at their median seconds
    p = run_sweep(*args[:2], "problem.seed=1,2,3", *args[3:], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    said = re.search(r"^prog: estimate (\S+) for 1 job\(s\) on 1 worker slot\(s\), from the seconds", p.stderr, re.M)
    # each run's start to its end: not its cpu_s, the worker's CPU alone (a sandboxed entrant's runs: a sixth of it)
    client = MlflowClient(store)
    (exp,) = [e.experiment_id for e in client.search_experiments() if e.name == "prog"]
    runs = client.search_runs([exp], "attributes.status = 'FINISHED'")
    took = [
        (r.info.end_time - r.info.start_time) / 1000 for r in runs if r.data.params.get("problem.seed") in ("1", "2")
    ]
    assert said and said.group(1) == duration(statistics.median(took)), (took, p.stderr)
    p = run_sweep(*args, "hydra.launcher.progress=false", "hydra.launcher.force=true", cwd=tmp_path)
    assert p.returncode == 0 and " done · " not in p.stderr + p.stdout


def test_the_estimate_takes_each_runs_start_to_its_end_over_its_batch(store, tmp_path):
    """What the estimate reads of a store (sweep.record.earlier, SQLite without MLflow) is what MLflow reads: each
    job run's start to its end, a batch's runs (each spanning the whole batch) divided by the batch's size."""
    from sweep.record.recorder import Recorder

    args = ["method=sgd", "method.max_epochs=5", "problem.n_bits=10", "tracker=none", "problem.seed=1,2"]
    p = run_sweep(
        "-m", *args, "hydra.launcher.batch=2", "hydra.launcher.n_workers=1", "mlflow.experiment=took", cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    client = MlflowClient(store)
    (exp,) = [e.experiment_id for e in client.search_experiments() if e.name == "took"]
    runs = [r for r in client.search_runs([exp]) if "sweep.config_hash" in r.data.tags]
    assert [r.data.tags.get("sweep.batch.size") for r in runs] == ["2", "2"]
    took = Recorder(store, "took").earlier_seconds()
    assert [t.method for t in took] == ["sgd", "sgd"]  # read with each run: a new arm is expected at its method's
    assert sorted((t.config_hash, t.seconds) for t in took) == sorted(
        (r.data.tags["sweep.config_hash"], (r.info.end_time - r.info.start_time) / 2000) for r in runs
    )


def test_runs_solved_alone_in_one_task_each_span_their_own_solve(store, tmp_path):
    """A newcomer's first hour: `sweep sweeps=tiled_w1` again said "estimate 8m01s" for a sweep that had taken 2m48s.
    Its tiled arms' seeds share a worker task but are solved alone, one after another: each run's start was the
    task's and its end the task's last, so each run took the whole task's seconds. Each spans its own solve now."""
    from sweep.record.recorder import Recorder

    args = ["method=sgd", "variant=tiled", "variant.tile_size=5", "method.hidden=20", "problem.n_bits=10"]
    args += ["method.max_epochs=30", "tracker=energy", "problem.seed=1,2,3", "mlflow.experiment=alone"]
    p = run_sweep("-m", *args, "hydra.launcher.batch=3", "hydra.launcher.n_workers=1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    client = MlflowClient(store)
    (exp,) = [e.experiment_id for e in client.search_experiments() if e.name == "alone"]
    runs = sorted(
        (r for r in client.search_runs([exp]) if "sweep.config_hash" in r.data.tags), key=lambda r: r.info.start_time
    )
    assert len(runs) == 3 and not any("sweep.batch.size" in r.data.tags for r in runs)  # one task, solved alone
    spans = [(r.info.start_time, r.info.end_time) for r in runs]
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:])), spans  # one after another
    took = Recorder(store, "alone").earlier_seconds()
    assert sum(t.seconds for t in took) <= (spans[-1][1] - spans[0][0]) / 1000 + 0.01, (took, spans)


def test_a_fresh_seed_is_expected_to_take_what_its_arm_took_and_a_failed_run_counts():
    """A newcomer's first hour (issue 43): `sweeps=parity_challenge problem.seed=1,2,3` said "estimate 11s" and took
    3 min: each new seed fell back to the median of every earlier run, and the entrant that runs into its 60 s
    limit had no seconds at all (FAILED runs were not read). A job is now expected to take its arm's seconds (its
    name without the seed), and a FAILED run's seconds count."""
    from sweep.launch.estimate import arm, expectation
    from sweep.record.earlier import Took, _took

    took = [Took("h1", "honest seed=0", 0, 1.0, "solver"), Took("h2", "out_of_time seed=0", 0, 60.0, "solver")]
    took += [Took("h3", "fourier seed=0", 0, 2.0, "fourier"), Took("h4", "fourier seed=1", 0, 4.0, "fourier")]
    expected = expectation(took)
    assert expected("h2", "anything", "solver") == 60.0  # the same config
    assert expected("new", "out_of_time seed=7", "solver") == 60.0  # another seed of the slow arm (was the median)
    assert expected("new", "fourier seed=9", "fourier") == 3.0  # its arm's median
    assert expected("new", "mine seed=0", "solver") == 30.5  # a new arm: its method's median
    # a method that never ran: no guess (was the median of all, 3.0: a first mlp_lm run beside gf2's milliseconds)
    assert expected("new", "km seed=0", "km") is None
    assert arm("hidden=1000 t50 seed=44") == "hidden=1000 t50" and arm("myseed=3 k=2") == "myseed=3 k=2"
    assert _took("h", "n", 1000, 61000, None).seconds == 60.0


def test_the_estimate_reads_failed_runs_too(store):
    from mlflow.tracking import MlflowClient

    from sweep.record.recorder import Recorder
    from sweep.record.tags import HASH_TAG

    rec = Recorder(store, "ended")
    client = MlflowClient(store)
    for status, h in (("FAILED", "hf"), ("KILLED", "hk"), ("FINISHED", "hd")):
        run = client.create_run(rec.experiment_id, tags={HASH_TAG: h}, run_name=h, start_time=1000)
        client.set_terminated(run.info.run_id, status, end_time=5000)
    assert sorted(t.config_hash for t in Recorder(store, "ended").earlier_seconds()) == ["hd", "hf"]
