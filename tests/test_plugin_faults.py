"""Faults the launcher plugin meets under a plain Hydra app (`hydra/launcher=local`, no `sweep` importable): a worker
that dies between jobs, a result the launcher cannot load, a task that raises. Each one is that job's failure at
most; every other job runs, and the user sees why."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_plain_app

# Job x=1 returns a value whose loading, in the launcher, takes 1.5 s, and ends its worker 0.5 s after it returned (a
# thread calls os._exit). The worker meanwhile answers job x=2, already in its pipe, and dies idle: the
# launcher's next send (job x=3) finds the pipe closed.
DIES_BETWEEN_JOBS = """
import os
import threading
import time

import hydra


class SlowToLoad:
    def __reduce__(self):
        return (time.sleep, (1.5,))


@hydra.main(version_base=None, config_path=None)
def main(cfg):
    print(f"job x={cfg.x}", flush=True)
    if cfg.x == 1:
        threading.Timer(0.5, os._exit, (3,)).start()
        return SlowToLoad()
    return cfg.x


main()
"""


def _jobs_run(stdout: str) -> list[str]:
    return sorted(line for line in stdout.splitlines() if line.startswith("job "))


def test_a_worker_that_dies_between_jobs_costs_no_job(tmp_path: Path) -> None:
    p = run_plain_app(
        tmp_path,
        DIES_BETWEEN_JOBS,
        "hydra/launcher=local",
        "hydra.launcher.n_workers=1",
        "hydra.launcher.progress=false",
        "+x=1,2,3,4,5",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert _jobs_run(p.stdout) == [f"job x={i}" for i in range(1, 6)]


# Job x=2's value pickles in the worker but raises when the launcher loads it.
UNLOADABLE_RESULT = """
import hydra


class Unloadable:
    def __reduce__(self):
        return (int, ("not a number",))


@hydra.main(version_base=None, config_path=None)
def main(cfg):
    print(f"job x={cfg.x}", flush=True)
    return Unloadable() if cfg.x == 2 else cfg.x


main()
"""


def test_a_result_the_launcher_cannot_load_fails_only_its_job(tmp_path: Path) -> None:
    p = run_plain_app(
        tmp_path,
        UNLOADABLE_RESULT,
        "hydra/launcher=local",
        "hydra.launcher.n_workers=1",
        "hydra.launcher.progress=false",
        "+x=1,2,3",
    )
    assert p.returncode == 1, p.stderr[-3000:]
    assert _jobs_run(p.stdout) == ["job x=1", "job x=2", "job x=3"]
    assert "Error executing job with overrides: ['+x=2']" in p.stderr, p.stderr[-3000:]
    assert "the job's result could not be loaded by the launcher (ValueError: invalid literal for int()" in p.stderr, (
        p.stderr[-3000:]
    )


RAISES = """
import hydra


def divide(x):
    return x / 0


@hydra.main(version_base=None, config_path=None)
def main(cfg):
    return divide(cfg.x)


main()
"""


def test_a_failed_task_shows_its_own_traceback(tmp_path: Path) -> None:
    # Hydra prints the frames of its sweeper; the task's, from the worker, come as the exception's cause
    p = run_plain_app(tmp_path, RAISES, "hydra/launcher=local", "hydra.launcher.progress=false", "+x=1")
    assert p.returncode == 1
    assert 'app.py", line 6, in divide' in p.stderr and "return x / 0" in p.stderr, p.stderr[-3000:]


# Each job prints many lines with print(), as any app does; PYTHONUNBUFFERED=1 (as on CI) makes print write the text
# and the newline apart, and the launcher writes its own job lines to the same stream.
CHATTY = """
import hydra


@hydra.main(version_base=None, config_path=None)
def main(cfg):
    for i in range(1500):
        print(f"job x={cfg.x} line {i}")
    return cfg.x


main()
"""


def test_lines_of_jobs_and_launcher_never_interleave(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    overrides = ("hydra/launcher=local", "hydra.launcher.n_workers=2", "hydra.launcher.progress=false", "+x=1,2,3,4")
    p = run_plain_app(tmp_path, CHATTY, *overrides)
    assert p.returncode == 0, p.stderr[-3000:]
    expected = {f"job x={x} line {i}" for x in range(1, 5) for i in range(1500)}
    lines = p.stdout.splitlines()
    assert {line for line in lines if line in expected} == expected
    assert sorted(line for line in lines if line not in expected) == [f"[FINISHED] x={x}" for x in range(1, 5)]


# The job's process limited to its address space now and 200 MiB more (as `ulimit -v` limits a shell's commands),
# then a 1 GiB allocation: refused.
OUT_OF_ADDRESS_SPACE = """
import resource

import hydra


@hydra.main(version_base=None, config_path=None)
def main(cfg):
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (used + 200 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
    bytearray(2**30)


main()
"""


def test_a_job_refused_memory_by_the_shells_limit_names_it(tmp_path: Path) -> None:
    """Task fault11 of issue 43: under `ulimit -v 800000` a torch job failed as `SystemError: <function
    _find_and_load at 0x7f5a...> returned NULL without setting an exception` (torch's import refused memory), under
    400000 as `ImportError: libtorch_cpu.so: failed to map segment from shared object`, a numpy one as a bare
    `MemoryError`: none named the limit. The job's line names it, with what to do."""
    p = run_plain_app(tmp_path, OUT_OF_ADDRESS_SPACE, "hydra/launcher=local", "hydra.launcher.progress=false", "+x=1")
    assert p.returncode == 1
    out = p.stdout + p.stderr
    assert "MemoryError" in out and "this shell's `ulimit -v` is " in out, out[-3000:]
    assert " KB: the job's memory was refused; raise it)" in out, out[-3000:]


# `ulimit -t 3` as the command starts (the launcher's process and every worker it forks): the job spins
OUT_OF_CPU_TIME = """
import resource

import hydra

resource.setrlimit(resource.RLIMIT_CPU, (3, 3))


@hydra.main(version_base=None, config_path=None)
def main(cfg):
    while True:
        pass


main()
"""


def test_a_worker_the_shells_cpu_time_limit_ended_names_it(tmp_path: Path) -> None:
    """Task fault11 of issue 43: under `ulimit -t 3` a sweep's long jobs each failed as `worker process 2152 died
    (exit code -9) while running the job` (the kernel's SIGKILL at the hard limit), as an OOM kill or a kill -9
    would: the line names the limit and the worker's CPU seconds."""
    p = run_plain_app(tmp_path, OUT_OF_CPU_TIME, "hydra/launcher=local", "hydra.launcher.progress=false", "+x=1")
    assert p.returncode == 1
    out = p.stdout + p.stderr
    said = "died (exit code -9) while running the job: this shell's CPU time limit ended it (`ulimit -t` is 3 s; "
    assert said in out and " CPU s over its jobs): raise it\n" in out, out[-3000:]
