"""Recording into the shared store against recording into SQLite: a gf2 sweep of N jobs (default 300,
tracker=none) on the sweep launcher at 2 workers, once into a fresh SQLite store and once into a fresh
PostgreSQL-backed MLflow tracking server with logins (sweep.server, started here in a temporary directory).

    .venv/bin/python benchmarks/bench_server.py [--jobs 300] [--workers 2] [--repeats 2]

Prints runs per second of each (the whole command: start-up, the jobs, every run recorded) and the ratio of the
per-run times, server / SQLite; target <= 2x. Measured in pairs, back to back, which goes first alternating
(paired.rounds): a change in the machine's load touches both alike; the ratio is formed within each pair and
printed as the median of the pairs' with its range (runs/s: medians). On a machine shared with other work the
CPU seconds a run costs are the steadier figure: those of the sweep command (launcher and workers) and, for the
server, of its processes (the tracking server's workers and PostgreSQL's; read from /proc, Linux).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from paired import ratios, rounds, spread

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.tracking_server: the same start as the tests'


def tree_cpu_s(root: int) -> float:
    """CPU seconds of process `root` and every process below it, alive or ended (Linux's /proc)."""
    stats = {}
    for d in Path("/proc").iterdir():
        try:
            stats[int(d.name)] = (d / "stat").read_text().rpartition(")")[2].split()
        except (ValueError, OSError):
            continue
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo += [p for p, st in stats.items() if int(st[1]) == pid and p not in tree]
    # utime, stime, and the times of the children it waited for (PostgreSQL's ended backends)
    ticks = sum(sum(int(x) for x in stats[p][11:15]) for p in tree if p in stats)
    return ticks / os.sysconf("SC_CLK_TCK")


def sweep(store: str, experiment: str, jobs: int, workers: int, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the command's and its workers') of one sweep command."""
    args = ["method=gf2", "problem.n_bits=12", "tracker=none", f"problem.seed=range(0,{jobs})"]
    args += [f"hydra.launcher.n_workers={workers}", f"mlflow.experiment={experiment}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "sweep", "-m", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **env, "MLFLOW_TRACKING_URI": store},
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"bench: sweep into {store} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


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
        serving: list[float] = []  # the server's own share of its rounds' CPU seconds
        done = {"sqlite": 0, "server": 0}

        def once(name: str, store: str, env: dict[str, str]) -> tuple[float, float]:
            """(wall, CPU) seconds of one sweep into one store."""
            done[name] += 1
            cpu0 = tree_cpu_s(srv.server.pid) + tree_cpu_s(srv.db.pid)
            wall, cpu = sweep(store, f"bench{done[name]}", a.jobs, a.workers, cwd, env)
            # the idle server's own ticks while SQLite is written are not SQLite's
            served = tree_cpu_s(srv.server.pid) + tree_cpu_s(srv.db.pid) - cpu0 if name == "server" else 0.0
            serving.extend([served] if name == "server" else [])
            ms = 1000 / a.jobs
            print(
                f"{name:7s} round {done[name]}: {a.jobs} runs in {wall:6.1f} s = {a.jobs / wall:5.1f} runs/s; "
                f"CPU a run {(cpu + served) * ms:4.0f} ms (the server's processes {served * ms:3.0f})",
                flush=True,
            )
            return wall, cpu + served

        got = rounds(
            {"sqlite": lambda: once("sqlite", sqlite, {}), "server": lambda: once("server", srv.uri, srv.env())},
            a.repeats,
        )
    times = {k: [w for w, _ in v] for k, v in got.items()}
    cpus = {k: [c for _, c in v] for k, v in got.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpus.items()}
    print(
        f"\n{a.jobs}-job gf2 sweep, {a.workers} workers, {a.repeats} pairs: "
        f"SQLite {a.jobs / med['sqlite']:.1f} runs/s, server {a.jobs / med['server']:.1f} runs/s (medians); "
        f"server / SQLite time per run {spread(ratios(times['server'], times['sqlite']))} (target <= 2x)\n"
        f"CPU a run (the sweep command's, and the server's processes'): SQLite {1000 * cpu_med['sqlite'] / a.jobs:.0f}"
        f" ms, server {1000 * cpu_med['server'] / a.jobs:.0f} ms (its processes "
        f"{1000 * statistics.median(serving) / a.jobs:.0f} ms, medians); server / SQLite "
        f"{spread(ratios(cpus['server'], cpus['sqlite']))}"
    )


if __name__ == "__main__":
    main()
