"""End to end, batched against unbatched in one run: whole `python -m sweep` commands into an MLflow store that
exists already (as a study's store does; it is made first, untimed), the same sweep with batching (a preset's own
`batch`, or hydra.launcher.batch=B) and without it (hydra.launcher.batch=1), measured in rounds (every command
once a round, back to back, in an order that rotates: paired.rounds) so a change in the machine's load touches all
alike; the ratios are formed within a round.

Each study also runs one of its jobs alone, the same command cut to one job: what every command pays around its
jobs (starting Python, composing, the check, the workers, the parent run). A batched sweep does more than that,
so unbatched / one-job bounds its speed-up (the `ceiling` column). CPU seconds are the commands' own and their
workers' (user + sys): on a loaded machine they show the work that wall-clock hides.

    .venv/bin/python benchmarks/bench_batch_sweep.py [--only sign_vs_sgd,weight_decay,gf2] [--seeds 1000]
                                                    [--batch 64] [--workers N] [--repeats 1]

Studies: `sweeps=sign_vs_sgd`, `sweeps=weight_decay` (their presets turn batching on), and `--seeds` gf2 seeds
(`method=gf2 problem.seed=range(0,N) tracker=none`). Each row: the command's wall-clock for one job, unbatched and
batched (medians of --repeats), jobs per second batched, the speed-up (unbatched / batched) and its ceiling (the
medians of the rounds' ratios; the line below a row gives their ranges).
Targets on a 2-core CPU: each preset >= 2x, 1,000 gf2 seeds >= 5x over the ~20 jobs/s of one job per task. Every
run of both commands is checked FINISHED, and each batched run's accuracy, epochs and secret equal its unbatched
twin's.
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

STUDIES = {
    "sign_vs_sgd": ["sweeps=sign_vs_sgd"],
    "weight_decay": ["sweeps=weight_decay"],
    "gf2": ["method=gf2", "tracker=none"],  # + problem.seed=range(0,N)
}
# the overrides that cut a study to one of its jobs (they replace the preset's swept values)
ONE_JOB = {
    "sign_vs_sgd": ["+sweeps/sign_vs_sgd_arm=sgd", "problem.k_sparse=3", "problem.seed=42"],
    "weight_decay": ["method.wd=0.01", "problem.seed=42"],
    "gf2": ["problem.seed=range(0,1)"],
}


def cpu_of_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(args: list[str], store: str, cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the command's and its workers') of one sweep command (it must succeed)."""
    c0 = cpu_of_children()
    t0 = time.perf_counter()
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
    return wall, cpu_of_children() - c0


def children(store: str, experiment: str) -> dict[tuple, tuple]:
    """An experiment's child runs: (params) -> (status, accuracy, epochs, secret_found)."""
    from mlflow.tracking import MlflowClient  # noqa: PLC0415 - only once the sweeps ran

    c = MlflowClient(store)
    exp = c.get_experiment_by_name(experiment)
    out = {}
    for r in c.search_runs([exp.experiment_id], max_results=50_000):
        if r.data.tags.get("sweep.parent") == "true":
            continue
        m = r.data.metrics
        key = tuple(sorted(r.data.params.items()))
        out[key] = (r.info.status, m.get("accuracy"), m.get("epochs"), r.data.tags.get("secret_found"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(STUDIES), help="studies to run, comma-separated")
    ap.add_argument("--seeds", type=int, default=1000, help="gf2 seeds")
    ap.add_argument("--batch", type=int, default=64, help="runs per batch where the preset sets none (gf2)")
    ap.add_argument("--workers", type=int, default=None, help="local workers (default: one per CPU)")
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    common = ["hydra/launcher=local", "hydra.launcher.progress=false"]
    if a.workers:
        common.append(f"hydra.launcher.n_workers={a.workers}")
    head = f"{'study':<14} {'jobs':>5} {'one job s':>10} {'unbatched s':>12} {'batched s':>10} {'jobs/s':>7}"
    print(f"{head} {'speed-up':>9} {'ceiling':>8} {'CPU s one job':>14} {'unbatched':>10} {'batched':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        for name in a.only.split(","):
            args = [*STUDIES[name], *common]
            if name == "gf2":
                args += [f"problem.seed=range(0,{a.seeds})"]
            batched = [] if name != "gf2" else [f"hydra.launcher.batch={a.batch}"]
            arms = {"one": ["hydra.launcher.batch=1", *ONE_JOB[name]], "alone": ["hydra.launcher.batch=1"]}
            arms["batched"] = batched
            results: dict[str, dict] = {}  # each arm's runs in its last round
            stores: dict[int, str] = {}
            done = dict.fromkeys(arms, 0)

            def once(arm: str) -> tuple[float, float]:
                i, done[arm] = done[arm], done[arm] + 1
                if i not in stores:  # the round's store, made before its first command (untimed)
                    stores[i] = f"sqlite:///{cwd / f'{name}-{i}.db'}"
                    run(["method=gf2", "tracker=none", "problem.seed=0", "mlflow.experiment=made"], stores[i], cwd)
                exp = f"{name}_{arm}_{i}"
                wall, cpu = run([*args, *arms[arm], f"mlflow.experiment={exp}"], stores[i], cwd)
                results[arm] = children(stores[i], exp)
                return wall, cpu

            got = rounds({arm: (lambda arm=arm: once(arm)) for arm in arms}, a.repeats)
            walls = {arm: [w for w, _ in v] for arm, v in got.items()}
            cpus = {arm: [c for _, c in v] for arm, v in got.items()}
            alone, together = results["alone"], results["batched"]
            assert alone.keys() == together.keys(), f"{name}: the batched sweep ran other jobs"
            assert all(v[0] == "FINISHED" for v in [*alone.values(), *together.values()]), f"{name}: a run failed"
            differ = [k for k in alone if alone[k] != together[k]]
            assert not differ, f"{name}: {len(differ)} run(s) differ batched, e.g. {differ[0]}"
            assert len(results["one"]) == 1, f"{name}: the one-job command ran {len(results['one'])} jobs"
            n = len(alone)
            w = {arm: statistics.median(v) for arm, v in walls.items()}
            c = {arm: statistics.median(v) for arm, v in cpus.items()}
            speed, ceiling = ratios(walls["alone"], walls["batched"]), ratios(walls["alone"], walls["one"])
            print(
                f"{name:<14} {n:>5} {w['one']:>10.1f} {w['alone']:>12.1f} {w['batched']:>10.1f}"
                f" {n / w['batched']:>7.1f} {statistics.median(speed):>8.2f}x {statistics.median(ceiling):>7.2f}x"
                f" {c['one']:>14.1f} {c['alone']:>10.1f} {c['batched']:>8.1f}\n"
                f"{'':<14} speed-up {spread(speed)}; ceiling {spread(ceiling)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
