"""Recording into the shared store against recording into SQLite: a gf2 sweep of N jobs (default 300,
tracker=none) on the sweep launcher at 2 workers, once into a fresh SQLite store and once into a fresh
PostgreSQL-backed MLflow tracking server with logins (sweep.server, started here in a temporary directory).

    .venv/bin/python benchmarks/bench_server.py [--jobs 300] [--workers 2] [--repeats 2]

Prints runs per second of each (the whole command: start-up, the jobs, every run recorded) and the ratio of the
per-run times, server / SQLite; target <= 2x. Measured in turns (SQLite, server, SQLite, server, ...): a change
in the machine's load touches both alike; the medians are compared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.tracking_server: the same start as the tests'


def sweep(store: str, experiment: str, jobs: int, workers: int, cwd: Path, env: dict[str, str]) -> float:
    """Wall seconds of one sweep command."""
    args = ["method=gf2", "problem.n_bits=12", "tracker=none", f"problem.seed=range(0,{jobs})"]
    args += [f"hydra.launcher.n_workers={workers}", f"mlflow.experiment={experiment}"]
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "sweep", "-m", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **env, "MLFLOW_TRACKING_URI": store},
    )
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"bench: sweep into {store} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    from tests.tracking_server import shared_store

    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp, shared_store(workers=4) as srv:
        cwd = Path(tmp)
        sqlite = f"sqlite:///{cwd / 'mlruns' / 'mlflow.db'}"
        times: dict[str, list[float]] = {"sqlite": [], "server": []}
        for i in range(a.repeats):
            for name, store, env in (("sqlite", sqlite, {}), ("server", srv.uri, srv.env())):
                wall = sweep(store, f"bench{i}", a.jobs, a.workers, cwd, env)
                times[name].append(wall)
                print(
                    f"{name:7s} round {i + 1}: {a.jobs} runs in {wall:6.1f} s = {a.jobs / wall:5.1f} runs/s", flush=True
                )
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"\n{a.jobs}-job gf2 sweep, {a.workers} workers, median of {a.repeats}: "
        f"SQLite {a.jobs / med['sqlite']:.1f} runs/s, server {a.jobs / med['server']:.1f} runs/s; "
        f"server / SQLite time per run = {med['server'] / med['sqlite']:.2f}x (target <= 2x)"
    )


if __name__ == "__main__":
    main()
