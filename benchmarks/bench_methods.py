"""Speed of the methods on numpy CPU against seed 000's CPU figures, and how they scale.

    .venv/bin/python benchmarks/bench_methods.py [--repeats 3] [--device cpu] [--sections abc]

(a) n=20, k=3, default hyper-parameters, seeds 42-46: per seed the job's own wall_clock_s (sweep.job.run,
tracker=none), the median over ``repeats`` runs, then the median over the seeds; target >= 3x faster than seed
000 (SGD 142 ms, GF(2) 0.5 ms, KM 1.1 ms: fixed figures, not measured here) with accuracy 1.0.
(b) scaling: gf2 and km at n=100/k=10 and n=1000/k=3, sgd and curriculum at n=50/k=3.
(c) device.dtype=float32 against the float64 default, every method at n=20, k=3 (on a problem it applies to):
per seed, ``repeats`` pairs of runs, float64 and float32 back to back (which goes first alternates:
paired.rounds); the float32/float64 ratio is the median of every pair's (seeds x repeats) with its range (below
1: float32 is faster), the ms the median over seeds of each seed's median, and whether accuracy and epochs moved.

wall_clock_s times learning only (sweep.methods.base.Outcome): solve() producing the secret or the trained
weights, with the checks the algorithm needs to stop (SGD's per-epoch early stopping). Evaluating the answer
(the reported test and train accuracy, curves) runs after the clock, for every method alike.
"""

from __future__ import annotations

import argparse
import statistics

from hydra import compose, initialize_config_dir
from paired import ratios, rounds, spread

from sweep import job
from sweep.config.schema import register_configs
from sweep.paths import CONF_DIR

SEED_000_CPU_MS = {"sgd": 142.0, "gf2": 0.5, "km": 1.1}
SPEED_METHODS = ["sgd", "gf2", "km", "sign_sgd", "curriculum", "fourier", "smt"]
SEEDS = range(42, 47)
# (c): every method once, with a problem it applies to (sgd twice: the MLP, and sparse_sum's linear model)
DTYPE_CASES = [
    ("sgd", ()),
    ("sign_sgd", ()),
    ("curriculum", ()),
    ("forward_forward", ("problem=sparse_and",)),
    ("gf2", ()),
    ("km", ()),
    ("fourier", ()),
    ("smt", ()),
    ("ols", ("problem=sparse_sum",)),
    ("sgd", ("problem=sparse_sum",)),
]
SCALING = [("gf2", 100, 10), ("gf2", 1000, 3), ("km", 100, 10), ("km", 1000, 3), ("sgd", 50, 3), ("curriculum", 50, 3)]


def timed(overrides: list[str], repeats: int) -> tuple[float, dict[str, float]]:
    """(median wall_clock_s over repeats, metrics of the last run) of one job."""
    runs = [job.run(compose("config", overrides=overrides)).metrics for _ in range(repeats)]
    return statistics.median(m["wall_clock_s"] for m in runs), runs[-1]


def over_seeds(
    method: str, n: int, k: int, device: str, repeats: int, extra: tuple[str, ...] = ()
) -> tuple[float, float, float]:
    """(median ms, min accuracy, median epochs) over SEEDS."""
    ms, acc, ep = [], [], []
    for seed in SEEDS:
        t, m = timed(
            [
                f"method={method}",
                f"problem.n_bits={n}",
                f"problem.k_sparse={k}",
                f"problem.seed={seed}",
                f"device={device}",
                "tracker=none",
                *extra,
            ],
            repeats,
        )
        ms.append(t * 1e3)
        acc.append(m["accuracy"])
        ep.append(m["epochs"])
    return statistics.median(ms), min(acc), statistics.median(ep)


def speed_table(args: argparse.Namespace) -> None:
    print(f"(a) speed at n=20, k=3, device={args.device}: median over seeds 42-46 of the median of {args.repeats} runs")
    print(
        "| method | median ms | seed 000 CPU ms | speedup | 3x target: ms <= | target | min accuracy | median epochs |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for method in SPEED_METHODS:
        ms, acc, ep = over_seeds(method, 20, 3, args.device, args.repeats)
        ref = SEED_000_CPU_MS.get(method)
        speed, bound = (f"{ref / ms:.1f}x", f"{ref / 3:.3f}") if ref else ("-", "-")
        target = ("met" if ref / ms >= 3 and acc == 1.0 else "MISSED") if ref else "-"
        print(
            f"| {method} | {ms:.3f} | {ref if ref else '-'} | {speed} | {bound} | {target} | {acc:.3f} | {ep:g} |",
            flush=True,
        )


def scaling_table(args: argparse.Namespace) -> None:
    print(f"\n(b) scaling, device={args.device}: median over seeds 42-46")
    print("| method | n | k | median ms | min accuracy | median epochs |")
    print("|---|---|---|---|---|---|")
    for method, n, k in SCALING:
        ms, acc, ep = over_seeds(method, n, k, args.device, 1)
        print(f"| {method} | {n} | {k} | {ms:.3f} | {acc:.3f} | {ep:g} |", flush=True)


def dtype_table(args: argparse.Namespace) -> None:
    print(
        f"\n(c) device.dtype=float32 vs float64, device={args.device}, n=20, k=3: per seed {args.repeats} pairs of "
        f"runs, float64 and float32 back to back; ms: median over seeds 42-46 of each seed's median"
    )
    print("| method | problem | float64 ms | float32 ms | float32/float64 | seeds whose accuracy or epochs moved |")
    print("|---|---|---|---|---|---|")
    for method, extra in DTYPE_CASES:
        problem = extra[0].split("=")[1] if extra else "sparse_parity"
        base = [f"method={method}", "problem.n_bits=20", "problem.k_sparse=3", f"device={args.device}", "tracker=none"]
        ms: dict[str, list[float]] = {"float64": [], "float32": []}
        pairs, moved = [], []
        for seed in SEEDS:
            last: dict[str, dict[str, float]] = {}

            def run(dtype: str, seed: int = seed) -> float:
                over = [*base, f"problem.seed={seed}", *extra, f"device.dtype={dtype}"]
                last[dtype] = job.run(compose("config", overrides=over)).metrics
                return last[dtype]["wall_clock_s"]

            got = rounds({"float64": lambda: run("float64"), "float32": lambda: run("float32")}, args.repeats)
            pairs += ratios(got["float32"], got["float64"])
            for dtype, seconds in got.items():
                ms[dtype].append(statistics.median(seconds) * 1e3)
            (a, e), (b, f) = ((last[d]["accuracy"], last[d]["epochs"]) for d in ("float64", "float32"))
            moved += [f"{seed}: {a:g}/{e:g} -> {b:g}/{f:g}"] if (a, e) != (b, f) else []
        ms64, ms32 = statistics.median(ms["float64"]), statistics.median(ms["float32"])
        print(
            f"| {method} | {problem} | {ms64:.3f} | {ms32:.3f} | {spread(pairs)} | {'; '.join(moved) or 'none'} |",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sections", default="abc", help="which tables to print, e.g. c for the float32 one only")
    args = ap.parse_args()
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        if "a" in args.sections:
            speed_table(args)
        if "b" in args.sections:
            scaling_table(args)
        if "c" in args.sections:
            dtype_table(args)


if __name__ == "__main__":
    main()
