"""How much tracker.scope=all_steps (every training step traced, ARD per epoch + total) costs over an
untracked run (tracker=none), on the same job. Target: <= 15% more time.

    /tmp/venv/bin/python benchmarks/bench_tracking_overhead.py [--repeats 5] [--trackers ard,cache,dmd] [k=v ...]

Runs are interleaved (none, tracked, none, tracked, ...) so drift on a shared machine hits both alike; the
figure is the ratio of medians of the whole job (training + summarising the traces), with the solve alone
(the logged wall_clock_s) next to it.
"""
from __future__ import annotations

import argparse
import statistics
import time

from hydra import compose, initialize_config_dir

from sweep import job
from sweep.paths import CONF_DIR
from sweep.schema import register_configs


def timed(cfg) -> tuple[float, float]:
    t0 = time.perf_counter()
    result = job.run(cfg)
    return time.perf_counter() - t0, result.metrics["wall_clock_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--trackers", default="ard", help="comma-separated trackers to compare with none")
    ap.add_argument("overrides", nargs="*", help="extra config overrides, e.g. method.hidden=500")
    args = ap.parse_args()
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        base = compose("config", overrides=[*args.overrides, "tracker=none"])
        tracked = {t: compose("config", overrides=[*args.overrides, f"tracker={t}", "tracker.scope=all_steps"])
                   for t in args.trackers.split(",")}
        timed(base)  # warm-up: imports, BLAS threads
        times: dict[str, list[tuple[float, float]]] = {"none": [], **{t: [] for t in tracked}}
        for _ in range(args.repeats):
            times["none"].append(timed(base))
            for t, cfg in tracked.items():
                times[t].append(timed(cfg))
    med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for k, v in times.items()}
    print(f"overrides: {' '.join(args.overrides) or '(defaults)'}; {args.repeats} runs each, medians")
    print(f"{'tracker':<8} {'job s':>8} {'solve s':>8} {'job ratio':>10} {'solve ratio':>12}")
    for k, (job_s, solve_s) in med.items():
        print(f"{k:<8} {job_s:8.3f} {solve_s:8.3f} {job_s / med['none'][0]:10.3f} {solve_s / med['none'][1]:12.3f}")
    for t in tracked:
        ratio = med[t][0] / med["none"][0]
        verdict = "within" if ratio <= 1.15 else "OVER"
        print(f"all_steps tracker={t}: overhead {100 * (ratio - 1):+.1f}% of the untracked job ({verdict} the 15% target)")


if __name__ == "__main__":
    main()
