"""The fixed cost of a single run: `python -m sweep method=gf2` end to end (a 0.1 ms solve), recorded into an
existing SQLite store, against `python -c pass`, `import mlflow` and the same command with recording off.

    .venv/bin/python benchmarks/bench_startup.py [--repeats 5]

Target: <= 1.5 s on a 2-core machine. A single run into an existing store writes through Python's sqlite3
(`sweep.record.sqlite.writer.SqliteRunWriter`) and never imports MLflow, whose SQL store alone costs seconds to
import. Prints medians of wall and CPU seconds (on a loaded machine, read the CPU time and the ratios) and the
ratios; the run's own `python -X importtime` check is that `mlflow` is not among its imports.
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


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of `cmd`: CPU time is what a loaded machine inflates least."""
    t0, c0 = time.perf_counter(), _cpu()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        env = {
            **os.environ,
            "MLFLOW_TRACKING_URI": f"sqlite:///{cwd / 'mlflow.db'}",
            "SWEEP_SPOOL_DIR": str(cwd / "spool"),
        }
        py = sys.executable
        single = [py, "-m", "sweep", "method=gf2"]
        timed(single, env, cwd)  # creates the store and the experiment (MLflow's path, once)
        cases = {
            "python -c pass": [py, "-c", "pass"],
            "python -c 'import mlflow'": [py, "-c", "import mlflow"],
            "python -m sweep method=gf2 mlflow.enabled=false": [*single, "mlflow.enabled=false"],
            "python -m sweep method=gf2 (recorded)": single,
        }
        samples = {k: [timed(c, env, cwd) for _ in range(a.repeats)] for k, c in cases.items()}
        med = {k: statistics.median(w for w, _ in v) for k, v in samples.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in samples.items()}
        imports = subprocess.run(
            [py, "-X", "importtime", *single[1:]], cwd=cwd, env=env, capture_output=True, text=True
        ).stderr
        mlflow_imported = any(ln.rstrip().endswith("| mlflow") for ln in imports.splitlines())
    base, ml, run = (
        med["python -c pass"],
        med["python -c 'import mlflow'"],
        med["python -m sweep method=gf2 (recorded)"],
    )
    single = "python -m sweep method=gf2 (recorded)"
    print(f"{'median of ' + str(a.repeats):52s} {'wall s':>8s} {'CPU s':>8s}")
    for k, v in med.items():
        print(f"{k:52s} {v:8.3f} {cpu[k]:8.3f}")
    print(f"single run / python -c pass:   {run / base:6.1f}x wall, {cpu[single] / cpu['python -c pass']:6.1f}x CPU")
    ml_cpu = cpu["python -c 'import mlflow'"]
    print(f"single run / import mlflow:    {run / ml:6.2f}x wall, {cpu[single] / ml_cpu:6.2f}x CPU")
    print(f"recording cost (recorded - disabled): {run - med['python -m sweep method=gf2 mlflow.enabled=false']:.3f} s")
    print(f"mlflow imported by the single run: {mlflow_imported}")
    print(f"target <= 1.5 s: {'met' if run <= 1.5 else 'NOT met'} ({run:.2f} s on this machine, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
