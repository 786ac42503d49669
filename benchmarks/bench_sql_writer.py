"""The recorder's write of one finished run: the direct SQL writer (one transaction, `sql_run_writer.py`)
against MLflow's own client calls (create_run + log_batch + log_artifacts + set_terminated), on the same
fresh SQLite store with the same runs (a gf2 job's config, metrics, a per-epoch curve, two artifacts).

    .venv/bin/python benchmarks/bench_sql_writer.py [--runs 100] [--repeats 3]

Each repeat writes --runs runs by each path back to back (which goes first alternates: paired.rounds). Prints ms per
run for each path (medians of the repeats) and their ratio, the median of the repeats' ratios with its range.
The SQL writer's parity with MLflow's client (the same rows) is tested in tests/test_sql_run_writer.py; this
only times it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

from paired import ratios, rounds, spread


def result(seed: int):
    from sweep.result import RunResult

    cfg = {
        "problem": {"name": "sparse_parity", "n_bits": 20, "k_sparse": 3, "seed": seed},
        "method": {"name": "gf2"},
        "variant": {"name": "standard"},
        "device": {"name": "cpu"},
        "tracker": {"name": "none"},
    }
    return RunResult(
        config=cfg,
        metrics={"accuracy": 1.0, "train_accuracy": 1.0, "epochs": 0.0, "wall_clock_s": 1e-4, "cost_usd": 1e-9},
        curves={"train_loss": [1.0 / (i + 1) for i in range(20)]},
        tags={k: cfg[k]["name"] for k in cfg},
        artifacts={"config.yaml": "x: 1\n" * 30, "tracker_buffers.csv": "a,b\n1,2\n"},
    )


def time_path(rec, n: int, seed0: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        rec.log(result(seed0 + i))
    return (time.perf_counter() - t0) / n * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3, help="paired measurements of both paths")
    a = ap.parse_args()
    from sweep.record.recorder import Recorder

    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(f"sqlite:///{Path(tmp) / 'mlflow.db'}", "bench")
        assert rec.sql is not None, "the store is not an SQL store"
        sql_writer = rec.sql
        rec.log(result(-1))  # warm: first-use costs (imports, the engine) out of both figures
        seeds = itertools.count(0, a.runs)  # every run a new config

        def path(writer) -> float:
            rec.sql = writer  # None: MLflow's client path, same store, same recorder
            return time_path(rec, a.runs, next(seeds))

        got = rounds({"sql": lambda: path(sql_writer), "client": lambda: path(None)}, a.repeats)
        rec.sql = sql_writer
    print(
        f"{a.runs} runs each, {a.repeats} repeats, SQLite store, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"SQL writer     {statistics.median(got['sql']):7.1f} ms/run (median)")
    print(f"MLflow client  {statistics.median(got['client']):7.1f} ms/run (median)")
    print(f"ratio client / SQL writer: {spread(ratios(got['client'], got['sql']), 1)}")


if __name__ == "__main__":
    main()
