"""The fixed cost of a single run: `python -m sweep method=gf2` end to end (a 0.1 ms solve), recorded into an existing
SQLite store, against `python -c pass`, `import mlflow`, a bare Hydra app with one config (one key, no groups: what
any `@hydra.main` command costs) and the same command with recording off.

    .venv/bin/python benchmarks/bench_startup.py [--repeats 5]

Targets: <= 1.5 s on a 2-core machine, and <= 1.5x the bare Hydra app (issue 40). Each single run is a new config
(its own seed): a run that runs and is recorded, not one found already recorded. A single run into an existing store
writes through Python's sqlite3 (`sweep.record.sqlite.writer.SqliteRunWriter`) and never imports MLflow, whose SQL
store alone costs seconds to import. Each repeat runs every case once, back to back, in an order that rotates
(paired.rounds). Prints medians of wall and CPU seconds (on a loaded machine, read the CPU time and the ratios) and
the ratios, each formed within a repeat and printed as the median of the repeats' with its range; the run's own
`python -X importtime` check is that `mlflow` is not among its imports.
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

from paired import ratios, rounds, spread

SINGLE = "python -m sweep method=gf2 (recorded)"
BARE = "bare Hydra app, one config"
BARE_APP = """import hydra


@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg):
    return cfg.x


main()
"""


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
        timed([*single, "problem.seed=0"], env, cwd)  # creates the store and the experiment (MLflow's path, once)
        (cwd / "bare").mkdir()
        (cwd / "bare" / "config.yaml").write_text("x: 1\n")
        (cwd / "bare" / "app.py").write_text(BARE_APP)
        seeds = iter(range(1, 1 << 30))
        cases = {
            "python -c pass": lambda: [py, "-c", "pass"],
            "python -c 'import mlflow'": lambda: [py, "-c", "import mlflow"],
            BARE: lambda: [py, str(cwd / "bare" / "app.py")],
            "python -m sweep method=gf2 mlflow.enabled=false": lambda: [*single, "mlflow.enabled=false"],
            SINGLE: lambda: [*single, f"problem.seed={next(seeds)}"],
        }
        samples = rounds({k: (lambda c=c: timed(c(), env, cwd)) for k, c in cases.items()}, a.repeats)
        med = {k: statistics.median(w for w, _ in v) for k, v in samples.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in samples.items()}
        imports = subprocess.run(
            [py, "-X", "importtime", *single[1:], f"problem.seed={next(seeds)}"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
        ).stderr
        mlflow_imported = any(ln.rstrip().endswith("| mlflow") for ln in imports.splitlines())
    run = med[SINGLE]

    def against(other: str) -> str:
        """The single run over another case, wall and CPU, within each repeat."""
        wall, cpus = ([x[i] for x in samples[SINGLE]] for i in (0, 1))
        return (
            f"wall {spread(ratios(wall, [x[0] for x in samples[other]]))}, "
            f"CPU {spread(ratios(cpus, [x[1] for x in samples[other]]))}"
        )

    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    print(f"{'median of ' + str(a.repeats):52s} {'wall s':>8s} {'CPU s':>8s}")
    for k, v in med.items():
        print(f"{k:52s} {v:8.3f} {cpu[k]:8.3f}")
    print(f"single run / python -c pass:  {against('python -c pass')}")
    ml = "python -c 'import mlflow'"
    print(f"single run / import mlflow:   {against(ml)}")
    off = "python -m sweep method=gf2 mlflow.enabled=false"
    recording = statistics.median(r[0] - o[0] for r, o in zip(samples[SINGLE], samples[off]))
    print(f"recording cost (recorded - disabled, median of the repeats' differences): {recording:.3f} s")
    print(f"single run / bare Hydra app:  {against(BARE)} (target <= 1.5x)")
    print(f"mlflow imported by the single run: {mlflow_imported}")
    print(f"target <= 1.5 s: {'met' if run <= 1.5 else 'NOT met'} ({run:.2f} s on this machine, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
