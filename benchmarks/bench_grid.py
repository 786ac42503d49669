"""A big grid's start: the launcher's memory and the time to its first job, at 1k, 10k and 50k jobs.

    .venv/bin/python benchmarks/bench_grid.py [--jobs 1000,10000,50000] [--ran 300]

Each size is one real `python -m sweep -m method=gf2 tracker=none 'problem.seed=range(0,N)'` recording into a
fresh MLflow experiment of one SQLite store (created before the first size). Every job is checked before any
starts, so the time to the first job grows with the grid (the check pass); the memory must not. Measured from
outside, on the launching process only (its workers apart): the peak resident set (`VmHWM` in /proc) when the
first job's line appears (with its CPU seconds so far: a loaded machine stretches the wall-clock), and again once
`--ran` jobs have finished (the dispatch streams too; at most 120 s later), then the sweep is stopped with SIGTERM.
bytes/job: the peak's growth from the smallest grid to each larger one, over the jobs added (what the launcher holds
per job before the first runs); bytes/ran: the growth while jobs ran, over the jobs that finished meanwhile (what it
keeps per finished job, the sweeper's JobReturn and the app's result, plus garbage not yet collected). Linux only
(/proc).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def peak_rss(pid: int) -> int:
    """The process's peak resident set so far, in bytes (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def cpu_s(pid: int) -> float:
    """The process's own CPU seconds so far (user + system; its workers apart), 0 once it is gone: what a loaded
    machine inflates least."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def first_job(n: int, store: str, cwd: Path, ran: int) -> tuple[float, float, int, int, int]:
    """(seconds to the first job's line, the launcher's CPU seconds then, peak RSS then, peak RSS once `ran` jobs
    finished, jobs finished by then) of an n-job grid."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweep",
            "-m",
            "method=gf2",
            "tracker=none",
            f"problem.seed=range(0,{n})",
            f"mlflow.experiment=bench_grid_{n}",
            "hydra.launcher.progress=false",
        ],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MLFLOW_TRACKING_URI": store},
    )
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(p.stderr), daemon=True).start()  # type: ignore[arg-type]
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith("[FINISHED]"):
            break
    else:
        sys.exit(f"bench: the {n}-job sweep ended before its first job ({p.wait()}):\n{''.join(err)[-3000:]}")
    ttfj, cpu, at_first = time.perf_counter() - t0, cpu_s(p.pid), peak_rss(p.pid)
    finished = [1]

    def count() -> None:
        for line in p.stdout:  # type: ignore[union-attr]
            finished[0] += line.startswith("[FINISHED]")

    threading.Thread(target=count, daemon=True).start()
    deadline = time.monotonic() + 120
    while finished[0] < ran and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    later, done = peak_rss(p.pid) or at_first, finished[0]
    p.send_signal(signal.SIGTERM)  # the sweep stops as a user's Ctrl-C stops it: running jobs recorded KILLED
    p.wait(timeout=300)
    return ttfj, cpu, at_first, later, done


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", default="1000,10000,50000", help="grid sizes, comma-separated")
    ap.add_argument("--ran", type=int, default=300, help="jobs to watch finish after the first one")
    args = ap.parse_args()
    sizes = [int(s) for s in args.jobs.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        sys.path.insert(0, str(ROOT / "src"))
        from sweep.record.recorder import Recorder  # noqa: PLC0415 - the store, made before the first grid

        Recorder(store, "warmup")
        print(
            f"{'jobs':>7} {'first job s':>12} {'CPU s':>6} {'s/1k jobs':>10} {'peak RSS MB':>12} {'bytes/job':>10} "
            f"{'then MB':>10} {'ran':>6} {'bytes/ran':>10}"
        )
        base: tuple[int, int] | None = None
        for n in sizes:
            ttfj, cpu, rss, later, ran = first_job(n, store, Path(tmp), args.ran)
            per_job = "" if base is None else f"{(rss - base[1]) / (n - base[0]):.0f}"
            base = base or (n, rss)
            print(
                f"{n:>7} {ttfj:>12.1f} {cpu:>6.1f} {ttfj / n * 1000:>10.2f} {rss / 2**20:>12.0f} {per_job:>10} "
                f"{later / 2**20:>10.0f} {ran:>6} {(later - rss) / max(ran, 1):>10.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
