"""The progress line reads number before label (`tiled_w1 3/30 · 3 done · ...`), its ETA, and the line a sweep
ends with (where to look next); `hydra.launcher.progress=false` prints none of the progress."""

from __future__ import annotations

import re

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


def test_plain_line_numbers_before_labels_and_eta_at_the_pace_so_far(capsys):
    clock = Clock()
    p = Progress(30, title="tiled_w1", clock=clock)  # stderr is not a terminal here: the plain line
    assert p.line() == "tiled_w1 0/30 · 0 done · 0 failed · 0 running · ETA ?"
    with p:
        for i in range(3):
            p.job_done(Job(i), ok=i != 1, line=f"job {i}")
        p.running_now(2)
        clock.t += 12.0  # 3 jobs in 12 s: 27 left take 108 s
        assert p.eta_s() == 108.0
        p.refresh()
    out, err = capsys.readouterr()
    assert out.splitlines() == ["job 0", "job 2"] and "job 1" in err  # a failed job's line goes to stderr
    line = "tiled_w1 3/30 · 2 done · 1 failed · 2 running · ETA 1m48s"
    assert err.splitlines().count(line) == 1  # every 5 s, and once at the end (not twice for the same state)
    assert [duration(s) for s in (0.4, 53, 245, 7620)] == ["0s", "53s", "4m05s", "2h07m"]


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
    p = run_sweep(*args, "hydra.launcher.progress=false", "hydra.launcher.force=true", cwd=tmp_path)
    assert p.returncode == 0 and " done · " not in p.stderr + p.stdout
