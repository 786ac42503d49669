"""A new SQLite store: copied from the template of MLflow's migrated empty schema (`sweep.record.sqlite.template`)
against made by MLflow's schema migrations (the path every new store took before, and the first one of each MLflow
version still takes), both through `sweep.record.creation.create` (a file beside the store, synced, renamed into
place, under the creation lock), measured in the same run.

    .venv/bin/python benchmarks/bench_store.py [--repeats 5]

Each repeat makes a store each way and opens one, back to back, in an order that rotates (paired.rounds). Prints
the median seconds of each path, their ratio (the median of the repeats' ratios, with its range), and the median
of a recorder opening a new store whole (made, its experiment created: what a sweep's first command does before
its first job). The copy's parity with MLflow's own making is tested in tests/test_store_template.py; this only
times it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from paired import ratios, rounds, spread


def make(uri: str) -> float:
    from sweep.record import creation

    t0 = time.perf_counter()
    with creation.creation_lock(uri):
        creation.create(uri)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    from sweep.record.recorder import Recorder

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["SWEEP_CACHE_DIR"] = str(root / "cache")
        make(f"sqlite:///{root / 'warm' / 'mlflow.db'}")  # the template kept (MLflow's making, not timed)
        names = iter(range(1 << 30))

        def copied() -> float:
            return make(f"sqlite:///{root / f'copy{next(names)}' / 'mlflow.db'}")

        def opened() -> float:
            t0 = time.perf_counter()
            Recorder(f"sqlite:///{root / f'open{next(names)}' / 'mlflow.db'}", "bench", import_spool=False)
            return time.perf_counter() - t0

        def migrated() -> float:
            i = next(names)
            os.environ["SWEEP_CACHE_DIR"] = str(root / f"empty{i}")  # no template: MLflow's migrations
            try:
                return make(f"sqlite:///{root / f'mlflow{i}' / 'mlflow.db'}")
            finally:
                os.environ["SWEEP_CACHE_DIR"] = str(root / "cache")

        got = rounds({"copied": copied, "opened": opened, "migrations": migrated}, a.repeats)
    old, new = statistics.median(got["migrations"]), statistics.median(got["copied"])
    print(f"new store, MLflow's migrations (a child process): {old:.3f} s (median of {a.repeats})")
    print(f"new store, the template copied:                   {new:.3f} s (median of {a.repeats})")
    print(f"ratio migrations / copied: {spread(ratios(got['migrations'], got['copied']), 0)}")
    print(f"a recorder opening a new store (made, its experiment created): {statistics.median(got['opened']):.3f} s")


if __name__ == "__main__":
    main()
