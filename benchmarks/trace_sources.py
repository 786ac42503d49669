"""Hand-placed against automatic traces (tracker.source=hand|auto): each method at its default config, its trace's
figures from both sources side by side, as docs/traces.md's table ("Hand and automatic traces").

    .venv/bin/python benchmarks/trace_sources.py [--device cpu|torch_cpu] [--methods sgd,gf2,...] [k=v ...]

Each row is one real job (sweep.job.run, tracker=energy: ard, dmd and the modelled energy on the CPU hierarchy
beside the counts, and bytedmd), on the method's first problem among sparse_parity, sparse_and, sparse_sum; ``ratio`` is
auto / hand.
"""

from __future__ import annotations

import argparse
import sys

from hydra.utils import get_class

from sweep import job
from sweep.config.schema import CLASSES, register_configs
from sweep.errors import ConfigError

COLUMNS = ("reads", "writes", "total_floats", "ard", "dmd", "bytedmd", "energy_pj")
PROBLEMS = ("sparse_parity", "sparse_and", "sparse_sum")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--methods", default=",".join(CLASSES["method"]))
    ap.add_argument("overrides", nargs="*", help="extra config overrides for every job, e.g. tracker.scope=all_steps")
    args = ap.parse_args()
    from hydra import compose, initialize_config_dir

    from sweep.paths import CONF_DIR

    register_configs()
    print(f"device={args.device} {' '.join(args.overrides)}".rstrip())
    head = " | ".join(f"{c} hand / auto" for c in COLUMNS)
    print(f"| method | problem | {head} | escaped |")
    print("|---|---|" + "---|" * (len(COLUMNS) + 1))
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for method in args.methods.split(","):
            applies = get_class(CLASSES["method"][method]).problems
            problem = next((p for p in PROBLEMS if p in applies), None)
            if problem is None:  # the character models: one source only (TorchTracer), docs/chars.md
                continue
            figures = {}
            for source in ("hand", "auto"):
                cfg = compose(
                    "config",
                    overrides=[
                        f"method={method}",
                        f"problem={problem}",
                        f"device={args.device}",
                        "tracker=energy",
                        "tracker.meter=none",
                        f"tracker.source={source}",
                        *args.overrides,
                    ],
                )
                try:
                    figures[source] = job.run(cfg).metrics
                except ConfigError as e:  # one source only (method=solver: a user's code has no hand trace)
                    print(f"trace_sources: method={method} left out: {e}", file=sys.stderr)
                    break
            if len(figures) < 2:
                continue
            h, a = figures["hand"], figures["auto"]
            cells = " | ".join(f"{h[c]:,.0f} / {a[c]:,.0f} ({a[c] / h[c]:.2g}x)" for c in COLUMNS)
            print(f"| {method} | {problem} | {cells} | {a['escaped']:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
