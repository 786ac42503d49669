"""Where one batched solve's time goes, phase by phase: the per-run host work around the step against the steps.

    .venv/bin/python benchmarks/profile_batch_phases.py [--device torch_cpu] [--runs 1024,4096] [--hidden 200]
        [--dtype float32] [--epochs 20] [--kernels]

One SGD.solve_batch of R sgd runs at fixed epochs (the target out of reach), n=20, 1,000 samples, batches of 32,
with a clock around each phase: the runs' initial weights (one RandomState a run), the data stacked and put on the
device, each epoch's orders (one shuffle a run, on the host), the epoch's gather of the data in those orders, the
steps, the early-stopping test, the gathers of the running runs, and the rest (each run's log entries, its
outcome). The device is synchronised before each clock read, so a phase's time is its own (the syncs add a little
to a GPU solve). Prints each phase in us a run and as a share of the solve. ``--kernels`` adds torch's profiler
table (the 15 costliest device kernels) of a second solve, on a GPU.

Per-run time that stays flat as R grows is work each run does; the phases say whether it is the host's or the
device's. On a CPU every phase is the host's.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from hydra import initialize_config_dir

sys.path.insert(0, str(Path(__file__).parent))
import on_device
from bench_batch_solve import build  # noqa: E402 - the benchmark's jobs, composed the same way

from sweep.config.schema import register_configs  # noqa: E402
from sweep.methods import batched, counter_rng, sgd  # noqa: E402
from sweep.paths import CONF_DIR  # noqa: E402

# (module, function name, phase): the functions a batched SGD solve calls for each phase
PHASES = (
    (sgd, "init_params", "initial weights (host)"),
    (batched, "stack", "data stacked, on the device"),
    (counter_rng, "randn_of", "initial weights (device draws)"),
    (batched, "orders", "orders (drawn)"),
    (batched, "flat_rows", "orders to the device"),
    (batched, "gather", "gather in order"),
    (batched, "mlp_step", "steps"),
    (batched, "reached", "early-stopping test"),
    (batched, "compact", "gathers of running runs"),
)


def timed(fn: Callable, phase: str, spent: dict[str, float], sync: Callable[[], None]) -> Callable:
    def run(*a: Any, **kw: Any) -> Any:
        sync()
        t0 = time.perf_counter()
        out = fn(*a, **kw)
        sync()
        spent[phase] += time.perf_counter() - t0
        return out

    return run


def profile(js: list, kernels: bool) -> None:
    be, R = js[0].backend, len(js)
    spent: dict[str, float] = defaultdict(float)
    originals = [(mod, name, getattr(mod, name)) for mod, name, _ in PHASES]
    for (mod, name, fn), (_, _, phase) in zip(originals, PHASES):
        setattr(mod, name, timed(fn, phase, spent, be.sync))
    try:
        t0 = be.clock()
        type(js[0].method).solve_batch([j.method for j in js], [j.ctx for j in js])
        total = be.clock() - t0
    finally:
        for mod, name, fn in originals:
            setattr(mod, name, fn)
    spent["the rest (logs, outcomes, Python)"] = total - sum(spent.values())
    print(f"R={R}: {total / R * 1e6:8.1f} us a run in all")
    for phase, s in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"    {phase:36s} {s / R * 1e6:8.1f} us a run  {s / total:6.1%}")
    if kernels and be.device.startswith("cuda"):
        import torch.profiler as tp  # noqa: PLC0415 - a GPU's table only

        with tp.profile(activities=[tp.ProfilerActivity.CPU, tp.ProfilerActivity.CUDA]) as prof:
            type(js[0].method).solve_batch([j.method for j in js], [j.ctx for j in js])
            be.sync()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="torch_cpu", help="a device config: cpu, torch_cpu, cuda")
    ap.add_argument("--runs", default="1024,4096")
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--rng", default=None, help="device.rng: host | counter (default: the device's)")
    a = ap.parse_args()
    sizes = [int(r) for r in a.runs.split(",")]
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        extra = (f"device.rng={a.rng}",) if a.rng else ()
        js = build(a.device, a.dtype, a.hidden, 1, range(max(sizes)), a.epochs, *extra)
        type(js[0].method).solve_batch([j.method for j in js[:64]], [j.ctx for j in js[:64]])  # warm-up
        print(f"{a.device} {a.dtype} hidden={a.hidden} rng={js[0].backend.rng}, {a.epochs} epochs a run")
        for r in sizes:
            profile(js[:r], a.kernels)


if __name__ == "__main__":
    on_device.run(main)
