"""What running a solver in its sandbox costs per run (sweep.sandbox, docs/challenge.md "Isolation"): the honest
example's solve under the trace in this process (the harness called directly) against a whole sandboxed run
(start, load, the call, close), with bubblewrap and in the fallback. Prints each one's wall-clock and CPU seconds
(this process's, and the sandbox's processes' read from /proc before they are killed), the call's own seconds on
the parent's clock, and the ratio of a run's wall-clock to the in-process solve's.

    .venv/bin/python benchmarks/bench_sandbox.py [--repeats 7] [--path examples/solvers/honest.py:solve]

Each repeat runs every mode once, back to back, in an order that rotates (paired.rounds). Each figure is the
median over the repeats; the ratio is formed within a repeat and printed as the median with its range.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

from paired import ratios, rounds, spread

from sweep.challenge import traced
from sweep.methods import solver_path as load
from sweep.problems.sparse_parity import SparseParity
from sweep.sandbox import Limits
from sweep.sandbox.isolation import ISOLATION_ENV, bwrap_missing


def cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--path", default="examples/solvers/honest.py:solve")
    args = ap.parse_args()
    d = SparseParity(n_bits=20, k_sparse=3, n_train=500, n_test=500, seed=1).generate()
    box = load.sandbox(args.path, Limits()).open()  # the in-process baseline's function: loaded here, on purpose
    box.close()
    fn = _in_process(args.path)
    modes = ["in-process", "process", *([] if bwrap_missing() else ["bwrap"])]

    def once(m: str) -> tuple[float, float, float]:
        w0, c0, child = time.perf_counter(), cpu(), 0.0
        if m == "in-process":
            traced.solve(fn, d.x_train, d.y_train, 20, 3, True)
            call = time.perf_counter() - w0
        else:
            os.environ[ISOLATION_ENV] = m
            b = load.sandbox(args.path, Limits()).open()
            b.call(d.x_train, d.y_train, 20, 3, True, timeout=60, harness=load.HARNESS)
            call, child = b.wall_s, b.close().cpu_s  # the sandbox's processes' CPU, read before the kill
        return time.perf_counter() - w0, cpu() - c0 + child, call

    seen = rounds({m: (lambda m=m: once(m)) for m in modes}, args.repeats)
    base = [w for w, _, _ in seen["in-process"]]
    print(f"{'mode':<11} {'run wall s':>10} {'run cpu s':>10} {'call wall s':>11}  run / in-process (wall)")
    for m, rows in seen.items():
        wall, c, call = (statistics.median(r[i] for r in rows) for i in range(3))
        print(f"{m:<11} {wall:>10.4f} {c:>10.4f} {call:>11.4f}  {spread(ratios([r[0] for r in rows], base), 1)}")


def _in_process(path: str):
    import importlib.util  # noqa: PLC0415 - the baseline only

    file, _, name = path.rpartition(":")
    spec = importlib.util.spec_from_file_location("bench_solver", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


if __name__ == "__main__":
    main()
