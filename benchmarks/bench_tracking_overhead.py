"""What tracker.scope=all_steps (every training step traced; per-epoch curves + totals) costs over an untracked
run (tracker=none) of the same job. Target: <= 1.25x.

    .venv/bin/python benchmarks/bench_tracking_overhead.py [--repeats 9] [--trackers ard,dmd,bytedmd,...] [k=v ...]

Tracking costs twice: recording events inside the solve, and summarising the traces after it (the whole run
and every epoch). Both are kept small by the trace's step templates (sweep.trace.trace): each kind of SGD step
is recorded once and replayed as a template id (sweep.methods.step_templates), and the passes run per (state, template).
Both are measured on the real job path (sweep.job.run): the solve as the logged wall_clock_s, the summaries by
timing every tracker.summarize / summarize_each call. Overhead = (solve_tracked - solve_none + summaries) /
solve_none, formed within a round: each round runs every tracker once, back to back (paired.rounds: the order
rotates), and the figure is the median of the rounds' ratios with their range (the seconds shown: medians);
``--cpu`` times the process's CPU seconds instead, which load inflates far less. (The job's untimed per-epoch
diagnostics do not depend on tracking and are left out of the ratio.)
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import contextmanager
from typing import Iterator

from hydra.utils import get_class
from paired import ratios, rounds, spread

from sweep import job
from sweep.backend import Backend
from sweep.config.schema import register_configs

CLOCK = [time.perf_counter]  # --cpu: time.process_time


@contextmanager
def timing_summaries(cls: type, spent: list[float]) -> Iterator[None]:
    """Add the seconds of every cls.summarize / cls.summarize_each call to spent[0] while inside."""
    originals = {name: getattr(cls, name) for name in ("summarize", "summarize_each")}

    def timed(original):
        def call(self, arg):
            t0 = CLOCK[0]()
            try:
                return original(self, arg)
            finally:
                spent[0] += CLOCK[0]() - t0

        return call

    for name, original in originals.items():
        setattr(cls, name, timed(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(cls, name, original)


def measure(cfg) -> tuple[float, float]:
    """(solve seconds, summarise seconds) of one job."""
    spent = [0.0]
    target = cfg.tracker.get("_target_")
    if target is None:
        return job.run(cfg).metrics["wall_clock_s"], 0.0
    with timing_summaries(get_class(target), spent):
        solve = job.run(cfg).metrics["wall_clock_s"]
    return solve, spent[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument(
        "--trackers", default="ard,cache,dmd,bytedmd,energy", help="comma-separated trackers to compare with none"
    )
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="time this process's CPU seconds instead of wall-clock (steadier on a loaded machine)",
    )
    ap.add_argument("overrides", nargs="*", help="extra config overrides, e.g. method.hidden=500")
    args = ap.parse_args()
    if args.cpu:
        CLOCK[0] = time.process_time
        Backend.clock = lambda self: (self.sync(), time.process_time())[1]  # the solve's logged seconds too
    from hydra import compose, initialize_config_dir

    from sweep.paths import CONF_DIR

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfgs = {"none": compose("config", overrides=[*args.overrides, "tracker=none"])}
        for t in args.trackers.split(","):
            cfgs[t] = compose("config", overrides=[*args.overrides, f"tracker={t}", "tracker.scope=all_steps"])
    measure(cfgs["none"])  # warm-up: imports, BLAS threads
    runs = rounds({k: (lambda cfg=cfg: measure(cfg)) for k, cfg in cfgs.items()}, args.repeats)
    solve_none = [s for s, _ in runs["none"]]
    print(
        f"overrides: {' '.join(args.overrides) or '(defaults)'}; {args.repeats} rounds, medians of "
        f"{'CPU' if args.cpu else 'wall-clock'} seconds; overhead: each round's (tracked solve + summaries) / untracked"
    )
    print(f"{'tracker':<8} {'solve s':>8} {'summaries s':>12}  overhead")
    for k, rs in runs.items():
        overhead = ratios([s + m for s, m in rs], solve_none)
        mid = statistics.median(overhead)
        verdict = "" if k == "none" else ("  within the 1.25x target" if mid <= 1.25 else "  OVER the 1.25x target")
        solve, summ = statistics.median(s for s, _ in rs), statistics.median(m for _, m in rs)
        print(f"{k:<8} {solve:8.3f} {summ:12.3f}  {spread(overhead, 3)}{verdict}")


if __name__ == "__main__":
    main()
