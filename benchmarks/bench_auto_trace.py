"""What the automatic trace costs against the hand-placed one (tracker.source=auto vs hand) on the same run: SGD at
hidden 200 (n=20), tracker.scope=published and all_steps. Target: auto's tracking time <= 3x hand's; the untracked
solve (tracker=none) is the common baseline and is not touched by either source.

    .venv/bin/python benchmarks/bench_auto_trace.py [--repeats 9] [--cpu] [--tracker ard] [k=v ...]

Tracking time = the tracked solve's seconds - the untracked solve's + the tracker's summaries (as in
bench_tracking_overhead.py, whose measurement this reuses): recording the trace inside the solve, then turning it
into figures. Each round runs every arm once, back to back (paired.rounds: the order rotates); auto/hand is
formed within a round, each side's tracking time against that round's untracked solve, and printed as the median
of the rounds' ratios with their range (the seconds shown: medians). ``--cpu`` times CPU seconds, steadier on a
loaded machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench_tracking_overhead import CLOCK, measure
from paired import ratios, rounds, spread

from sweep.backend import Backend
from sweep.config.schema import register_configs

SCOPES = ("published", "all_steps")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--tracker", default="ard")
    ap.add_argument("--cpu", action="store_true", help="time CPU seconds instead of wall-clock")
    ap.add_argument("overrides", nargs="*", help="extra config overrides, e.g. device=torch_cpu")
    args = ap.parse_args()
    if args.cpu:
        CLOCK[0] = time.process_time
        Backend.clock = lambda self: (self.sync(), time.process_time())[1]
    from hydra import compose, initialize_config_dir

    from sweep.paths import CONF_DIR

    register_configs()
    base = ["method=sgd", "method.hidden=200", *args.overrides]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfgs = {("none", ""): compose("config", overrides=[*base, "tracker=none"])}
        for scope in SCOPES:
            for source in ("hand", "auto"):
                over = [*base, f"tracker={args.tracker}", f"tracker.scope={scope}", f"tracker.source={source}"]
                cfgs[scope, source] = compose("config", overrides=over)
    measure(cfgs["none", ""])  # warm-up: imports, BLAS threads
    runs = rounds({k: (lambda cfg=cfg: measure(cfg)) for k, cfg in cfgs.items()}, args.repeats)
    none = [s for s, _ in runs["none", ""]]
    print(
        f"sgd hidden 200, tracker={args.tracker} {' '.join(args.overrides)}; {args.repeats} rounds, medians of "
        f"{'CPU' if args.cpu else 'wall-clock'} seconds; untracked solve {statistics.median(none):.3f} s"
    )
    print(f"{'scope':<10} {'source':<6} {'solve s':>8} {'summaries s':>12} {'tracking s':>11}  auto/hand")
    for scope in SCOPES:
        tracking = {}  # each round's tracking seconds: its tracked solve less its own untracked solve, + summaries
        for source in ("hand", "auto"):
            rs = runs[scope, source]
            tracking[source] = [max(s - n, 0.0) + m for (s, m), n in zip(rs, none)]
            ratio = ""
            if source == "auto":
                r = ratios(tracking["auto"], tracking["hand"])
                ratio = f"{spread(r)} {'within' if statistics.median(r) <= 3 else 'OVER'} the 3x target"
            solve, summ = (statistics.median(x) for x in zip(*rs))
            track = statistics.median(tracking[source])
            print(f"{scope:<10} {source:<6} {solve:8.3f} {summ:12.4f} {track:11.4f}  {ratio}")


if __name__ == "__main__":
    main()
