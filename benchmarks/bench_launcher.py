"""Launcher throughput: a gf2 sweep of N jobs (default 200, tracker=none) through `python -m sweep -m`, on the
sweep launcher's local pool and on Hydra's basic launcher, each recording into a fresh MLflow store.

    .venv/bin/python benchmarks/bench_launcher.py [--jobs 200] [--skip-basic] [--workers N] [--repeats 3]
                                                  [--only local,local-1w,basic] [--tracker none]

Issue 40's figure: `--jobs 300 --tracker ard --only local --skip-basic` (the command `sweep -m method=gf2
'problem.seed=range(0,300)'` with its default tracker, into an existing store): jobs/s of the whole command and
amortized (less the 1-job sweep's start-up, measured in the same run), each against the target of 300 jobs/s.

Like with like, on both of the launcher's paths: `local` (all CPUs, fast path: hydra.launcher.fast=true),
`local-public` (Hydra's public load_sweep_config and run_job: hydra.launcher.fast=false), `local-1w` and
`local-public-1w` (one worker: serial, as `basic` is) and `basic`, each measured `--repeats` times, in rounds
(one measurement of each, in an order that rotates: paired.rounds), so a change in the machine's load touches them
alike. The ratios to `basic` are of CPU per job (every process, every core) and of amortized wall-clock per job (the
one-worker rows are the serial comparison; the all-CPU rows add the parallel pool), each formed within a round:
the table gives the median of the rounds' ratios, the lines below it their ranges.

Figures per launcher: total wall-clock of the command; the pure solve time (sum of the runs' wall_clock_s);
per-job overhead = (total wall - sum of solve) / N, everything else included (interpreter and Hydra start-up,
composition, shipping, MLflow); the same without the command's fixed start-up cost (a 1-job sweep's wall
time, measured the same way), which is the amortized framework cost per job. Target: <= 30 ms per job.
The sweep launcher is measured `--repeats` times (a fresh experiment each) and the medians are printed.
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

ROOT = Path(__file__).resolve().parents[1]
TARGET_JOBS_S = 300  # issue 40: 300 gf2 jobs into an existing store, on 2 cores
TRACKER = ["none"]  # --tracker


def cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # the sweep command and its (joined) workers
    return ru.ru_utime + ru.ru_stime


def run(args: list[str], store: str, cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one sweep command."""
    c0, t0 = cpu_children(), time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "sweep", "-m", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "MLFLOW_TRACKING_URI": store},
    )
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"bench: sweep failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return wall, cpu_children() - c0


def runs(store: str, experiment: str) -> tuple[list, list]:
    """(child runs, parent runs) of an experiment."""
    from mlflow.tracking import MlflowClient

    c = MlflowClient(store)
    exp = c.get_experiment_by_name(experiment)
    rs = c.search_runs([exp.experiment_id], max_results=50000)
    return (
        [r for r in rs if r.data.tags.get("sweep.parent") != "true"],
        [r for r in rs if r.data.tags.get("sweep.parent") == "true"],
    )


def once(launcher: str, n: int, store: str, cwd: Path, extra: list[str], rep: int, name: str) -> dict[str, float]:
    """One measurement: a 1-job sweep (the fixed start-up) then the n-job sweep, each in its own experiment."""
    common = ["method=gf2", f"tracker={TRACKER[0]}", *extra, f"hydra/launcher={launcher}"]
    warm, bench_exp = f"warm_{name}_{rep}", f"bench_{name}_{rep}"
    start_up, start_up_cpu = run([*common, "problem.seed=100000", f"mlflow.experiment={warm}"], store, cwd)
    wall, cpu = run([*common, f"problem.seed=range(0,{n})", f"mlflow.experiment={bench_exp}"], store, cwd)
    kids, parents = runs(store, bench_exp)
    assert len(kids) == n and all(r.info.status == "FINISHED" for r in kids), "not every job FINISHED"
    solve = sum(r.data.metrics["wall_clock_s"] for r in kids)
    out = {
        "wall": wall,
        "solve": solve,
        "start_up": start_up,
        "per_job_ms": (wall - solve) / n * 1e3,
        "amortized_ms": (wall - start_up - solve) / n * 1e3,
        "cpu_per_job_ms": (cpu - start_up_cpu) / n * 1e3,
    }
    pm = parents[0].data.metrics if parents else {}
    if "launcher_cpu_s" in pm:  # the sweep launcher's own split: where the CPU goes
        wm = runs(store, warm)[1][0].data.metrics
        out["launcher_cpu_ms"] = (pm["launcher_cpu_s"] - wm["launcher_cpu_s"]) / n * 1e3
        out["workers_cpu_ms"] = (pm["workers_cpu_s"] - wm["workers_cpu_s"]) / n * 1e3
    return out


def median(reps: list[dict[str, float]]) -> dict[str, float]:
    """The median of every figure (start-up noise of a second or so moves a single amortized figure by ~5 ms
    a job at n=200)."""
    return {k: statistics.median(r[k] for r in reps) for k in reps[0]} | {"repeats": len(reps)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--workers", type=int, default=None, help="hydra.launcher.n_workers (default: CPU count)")
    ap.add_argument("--skip-basic", action="store_true", help="only the sweep launcher")
    ap.add_argument("--repeats", type=int, default=3, help="measurements of each launcher (median)")
    ap.add_argument("--only", default="", help="comma-separated launchers to measure (default: all)")
    ap.add_argument("--tracker", default="none", help="the jobs' tracker (ard: the project's default)")
    a = ap.parse_args()
    TRACKER[0] = a.tracker
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        store = f"sqlite:///{cwd / 'mlruns' / 'mlflow.db'}"
        from sweep.record.recorder import Recorder

        Recorder(store, "warmup")  # the store's schema exists before either launcher runs
        extra = [f"hydra.launcher.n_workers={a.workers}"] if a.workers else []
        fast, public = ["hydra.launcher.fast=true"], ["hydra.launcher.fast=false"]
        one = ["hydra.launcher.n_workers=1"]
        configs = {
            "local": ("local", [*extra, *fast]),
            "local-public": ("local", [*extra, *public]),
            "local-1w": ("local", [*one, *fast]),
            "local-public-1w": ("local", [*one, *public]),
        }
        if not a.skip_basic:  # ~2 minutes a measurement
            configs["basic"] = ("basic", [])
        if a.only:
            configs = {k: v for k, v in configs.items() if k in a.only.split(",")}
        done = dict.fromkeys(configs, 0)

        def measure(name: str) -> dict[str, float]:
            launcher, ex = configs[name]
            done[name] += 1
            return once(launcher, a.jobs, store, cwd, ex, done[name] - 1, name)

        reps = rounds({name: (lambda name=name: measure(name)) for name in configs}, a.repeats)
        results = {name: median(r) for name, r in reps.items()}
    print(
        f"{a.jobs}-job gf2 sweep (tracker={a.tracker}), {os.cpu_count()} CPUs, MLflow SQLite store; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"figures: the median over {a.repeats} measurements of each")
    base = results.get("basic")
    print(
        f"{'launcher':<16}{'total wall':>11}{'sum solve':>11}{'start-up':>10}{'per job':>10}{'amortized':>11}"
        f"{'CPU/job':>10}" + (f"{'wall/basic':>12}{'CPU/basic':>11}" if base else "")
    )

    def to_basic(name: str, key: str) -> list[float]:
        """Each round's figure over basic's in the same round."""
        return ratios([r[key] for r in reps[name]], [r[key] for r in reps["basic"]])

    for name, r in results.items():
        against = (
            f"{statistics.median(to_basic(name, 'amortized_ms')):>12.3f}"
            f"{statistics.median(to_basic(name, 'cpu_per_job_ms')):>11.3f}"
            if base
            else ""
        )
        print(
            f"{name:<16}{r['wall']:>10.2f}s{r['solve']:>10.2f}s{r['start_up']:>9.2f}s"
            f"{r['per_job_ms']:>8.1f}ms{r['amortized_ms']:>9.1f}ms{r['cpu_per_job_ms']:>8.1f}ms" + against
        )
    for name in [n for n in results if n != "basic"] if base else []:
        print(
            f"{name}: amortized wall / basic {spread(to_basic(name, 'amortized_ms'), 3)}, "
            f"CPU / basic {spread(to_basic(name, 'cpu_per_job_ms'), 3)}"
        )
    for name, r in results.items():
        if "launcher_cpu_ms" in r:
            print(
                f"{name}: CPU per job in the launching process {r['launcher_cpu_ms']:.1f} ms (compose, route, "
                f"record in MLflow), in the workers {r['workers_cpu_ms']:.1f} ms (Hydra's job set-up, the job)"
            )
    for name, r in results.items():
        whole, rest = a.jobs / r["wall"], r["wall"] - r["start_up"]
        amortized = (
            f"{a.jobs / rest:.1f} jobs/s less the 1-job sweep's start-up ({a.jobs / rest / TARGET_JOBS_S:.2f}x)"
            if rest > 0
            else "less the start-up: not measurable (the 1-job sweep took longer: a loaded machine)"
        )
        print(
            f"{name}: {whole:.1f} jobs/s whole command ({whole / TARGET_JOBS_S:.2f}x the target of {TARGET_JOBS_S}), "
            f"{amortized}; CPU a job {r['cpu_per_job_ms']:.1f} ms: at most "
            f"{2e3 / max(r['cpu_per_job_ms'], 1e-9):.0f} jobs/s on 2 cores"
        )
    print(
        "per job = (total wall - sum solve) / jobs; amortized = the same less the start-up of a 1-job sweep; "
        "CPU/job = CPU seconds of the command and its workers, less the 1-job sweep's, per job (all processes, "
        "all cores; a loaded machine inflates wall-clock, not CPU); wall/basic and CPU/basic: amortized wall and "
        "CPU per job as a fraction of basic's in the same round (medians of the rounds' ratios). Target (every "
        "local row, fast and public path): amortized <= 30 ms."
    )


if __name__ == "__main__":
    main()
