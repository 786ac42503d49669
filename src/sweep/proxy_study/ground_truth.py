"""The CPU ground truth, run here: ``python benchmarks/proxy_cachegrind.py [--budget-s S]``. For each
configuration and seed of design.ground_truth(): the proxies of its traced solve (natively, tracker=energy on the
cpu hierarchy) and the cache misses of the same solve untraced under valgrind's simulator (sweep.proxy_study.
cachegrind), one row each in docs/results/proxy_study/cachegrind-<date>.csv, written as each ends. A second call
resumes: a (configuration, seed) already in any cachegrind-*.csv file is not run again."""

from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from sweep.arguments import summary
from sweep.paths import git_commit
from sweep.proxy_study import cachegrind, dataset, design

PROXY_METRICS = ("ard", "dmc", "dmd", "bytedmd", "energy_pj", "cache_miss_floats", "total_floats", "wall_clock_s")


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    return f"{platform.machine()} {cpu}".strip()


def valgrind_version() -> str:
    try:
        return subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def run(out_dir: Path, budget_s: float, cases: Sequence[tuple[str, int, list[str]]] | None = None) -> int:
    """Run the cases not yet in out_dir's cachegrind-*.csv until `budget_s` would be passed; the rows written."""
    from sweep import job  # noqa: PLC0415 - the job machinery: seconds to import, only for a run

    cases = design.ground_truth() if cases is None else cases
    done = {(r["config"], r["seed"]) for r in dataset.read_all(out_dir, "cachegrind-*.csv")}
    today = datetime.date.today().isoformat()
    path = out_dir / f"cachegrind-{today}.csv"
    fixed = {
        "date": today,
        "machine": machine(),
        "valgrind": valgrind_version(),
        "hierarchy": " ".join(cachegrind.options()),
        "commit": git_commit(),
    }
    t0, longest, written = time.monotonic(), 0.0, 0
    for config, seed, args in cases:
        if (config, str(seed)) in done:
            continue
        if time.monotonic() - t0 + longest > budget_s:
            print(f"proxy_cachegrind: budget of {budget_s:.0f} s reached; run again to go on", file=sys.stderr)
            break
        t1 = time.monotonic()
        cfg = design.compose(args)
        result = job.run(cfg)
        with tempfile.TemporaryDirectory() as tmp:
            figures = cachegrind.simulate(job.job_config(cfg), Path(tmp))
        proxies = {k: v for k, v in result.metrics.items() if k in PROXY_METRICS or k.endswith(("_reads", "_writes"))}
        dataset.append(path, {"config": config, "seed": seed, **fixed, **proxies, **figures})
        written += 1
        longest = max(longest, time.monotonic() - t1)
        print(
            f"{config} seed={seed}: D1 misses {figures['cg_d1_misses']:,.0f} (arrays "
            f"{figures['cg_d1_misses_arrays']:,.0f}), dmd {proxies.get('dmd', float('nan')):.3g} "
            f"[{time.monotonic() - t1:.0f} s]",
            flush=True,
        )
    return written


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=summary(__doc__))
    ap.add_argument("--out", type=Path, default=dataset.DATASET_DIR, help="the dataset's directory")
    ap.add_argument("--budget-s", type=float, default=900.0, help="stop starting runs past this many seconds")
    a = ap.parse_args(argv)
    run(a.out, a.budget_s)
    return 0
