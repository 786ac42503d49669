"""Per-run solve time of R sgd runs solved together (SGD.solve_batch) against the same run solved alone.

    .venv/bin/python benchmarks/bench_batch_solve.py [--sizes 1,4,16,64,256] [--hidden 50,200]
        [--dtypes float64,float32] [--devices cpu,torch_cpu] [--epochs 3] [--repeats 2] [--threads 1]
        [--sections abcd] [--gpu-sizes 1024,4096,16384] [--gpu-whole-sizes 1024,4096]

One thread (device.threads, the issue's table), n=20, k=3, 1,000 training samples, batches of 32.
(a) steps: every run trains exactly ``--epochs`` epochs (target accuracy out of reach), so the batch and the
solo run do the same work; per R: the speed-up (solo solve time / (batch solve time / R)), and the achieved
FLOP/s of the batch as a fraction of a large matmul's FLOP/s in the same library and dtype on the same core.
(b) whole solves: R=16 seeds trained to their own early stop, the 16 solo solves against one batch of 16.
(c) the ceiling: the step's four batched matmuls alone (x W1^T, W2 h^T, dout h, dh^T x: numpy's stacked matmul,
torch's bmm) at these shapes, for R in ``--kernel-sizes``, as a fraction of the large matmul's FLOP/s. A step
also has its elementwise passes, so no whole step can reach a larger fraction than its matmuls alone.
(d) on a GPU (``--sections d``): R in ``--gpu-sizes`` runs at once on the GPU against the solo numpy run on
one CPU thread, per run, at fixed epochs and as whole solves (``--gpu-whole-sizes``), for each ``--gpu-rng``
(counter: draws on the device, cuda's default; host: numpy's draws on the host).
(e) on a GPU: the measured energy of a run (sweep.energy.meter: NVML, idle subtracted, calibrated) when R runs
are solved at once, R in ``--energy-sizes``, at fixed epochs: a run's trace, and every proxy, is the same at
every R; its Joules are not.
Solo against batched: each of ``--repeats`` rounds times both back to back, which goes first alternating
(paired.rounds), and a speed-up is the median of the rounds' ratios with their range; the times shown are medians.
Times are the process's CPU time on a CPU (see seconds), wall time on a GPU. (c)'s fractions of the matmul peak
stay the fastest of their timings (a ceiling, not a comparison). cuda is added to the devices when torch sees a
GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np
import on_device
from hydra import compose, initialize_config_dir
from paired import cell, ratios, rounds, spread

from sweep import job
from sweep.config.schema import register_configs
from sweep.methods import batched
from sweep.methods.batched import mT
from sweep.paths import CONF_DIR

N, BATCH, N_TRAIN, TEST_CHUNK = 20, 32, 1000, 64


def build(device: str, dtype: str, hidden: int, threads: int, seeds, epochs: int | None, *extra: str) -> list[job.Job]:
    """One job per seed; with ``epochs``, each trains exactly that many epochs (its target is out of reach).
    Composed once; each seed's job is built from the resolved config with its seed (thousands of jobs on a GPU)."""
    cfg = compose(
        "config",
        overrides=[
            "method=sgd",
            f"method.hidden={hidden}",
            f"problem.n_bits={N}",
            f"problem.n_train={N_TRAIN}",
            f"device={device}",
            f"device.dtype={dtype}",
            f"device.threads={threads}",
            "tracker=none",
            *extra,
        ],
    )
    config = job.job_config(cfg)
    jobs = []
    for s in seeds:
        j = job.build_job(cfg, {**config, "problem": {**config["problem"], "seed": s}})
        jobs.append(j if epochs is None else fixed_epochs(j, epochs))
    return jobs


def seconds(js: list[job.Job], batched: bool) -> float:
    """The seconds to solve the jobs: one solve_batch, or one solve after another. On a CPU the seconds are this
    process's CPU time (one thread): on a shared machine a solve of a few ms often runs within one time slice
    while a longer one is always preempted, so wall time would favour the short solo solves over a batch. On a
    GPU, wall time after a synchronise."""
    be = js[0].backend
    now = be.clock if be.device.startswith("cuda") else time.process_time
    t0 = now()
    if batched:
        type(js[0].method).solve_batch([j.method for j in js], [j.ctx for j in js])
    else:
        for j in js:
            j.method.solve(j.ctx)
    return now() - t0


def solo_against(solo_js: list[list[job.Job]], per_run: float, batch, repeats: int) -> tuple[list[float], list[float]]:
    """(solo seconds a run, batch seconds) in `repeats` paired rounds; the solo timing cycles through solo_js (the
    same work each), `per_run` divides its seconds (the jobs solved one after another in one solo timing)."""
    turn = iter(range(1 << 30))
    got = rounds(
        {"solo": lambda: seconds(solo_js[next(turn) % len(solo_js)], False) / per_run, "batch": batch}, repeats
    )
    return got["solo"], got["batch"]


def flops_per_epoch(hidden: int) -> float:
    """A run's matmul FLOPs in one epoch: per step forward x W1^T and h W2^T, backward dW2, dh and dW1
    (2 FLOPs a multiply-add), plus the early-stopping forward on one chunk of the test set."""
    steps = -(-N_TRAIN // BATCH)
    return steps * step_flops(hidden) + 2 * TEST_CHUNK * (N * hidden + hidden)


def step_flops(hidden: int) -> float:
    """One step's matmul FLOPs for one run: forward x W1^T and h W2^T, backward dW2, dh and dW1."""
    return 2 * (2 * BATCH * N * hidden + 3 * BATCH * hidden)


def peak(device: str, dtype: str) -> float:
    """FLOP/s of a 1024^3 matmul in this library and dtype on one thread (the machine's limit)."""
    js = build(device, dtype, 8, 1, [0], 1)
    be = js[0].backend
    a = be.asarray(np.random.RandomState(0).randn(1024, 1024))
    a @ a
    best, now = float("inf"), be.clock if be.device.startswith("cuda") else time.process_time
    for _ in range(3):
        t0 = now()
        a @ a
        best = min(best, now() - t0)
    return 2 * 1024**3 / best


def kernels(device: str, dtype: str, hidden: int, runs: int, threads: int, repeats: int) -> tuple[float, float]:
    """FLOP/s of (the step's four batched matmuls timed alone, the whole step: batched.mlp_step) for ``runs``
    runs at n=N, batch BATCH, with the operands laid out as mlp_step lays them out."""
    be = build(device, dtype, hidden, threads, [0], 1)[0].backend  # the backend with its thread setting applied
    rs = np.random.RandomState(0)

    def arr(*shape, scale: float = 1.0):
        return be.asarray(rs.randn(*shape) * scale)

    x, w1, w2 = arr(runs, BATCH, N), arr(runs, hidden, N), arr(runs, 1, hidden)
    h, dout, dh = arr(runs, BATCH, hidden), arr(runs, 1, BATCH), arr(runs, BATCH, hidden)
    p = {"W1": arr(runs, hidden, N, scale=0.3), "b1": arr(runs, hidden), "W2": arr(runs, 1, hidden, scale=0.01)}
    p["b2"] = arr(runs, 1, scale=0.0)
    y = be.asarray(np.sign(rs.randn(runs, BATCH)))
    upd = batched.RunsUpdate(be, np.full(runs, 1e-9), np.zeros(runs), sign=False)  # margins stay active

    def matmuls() -> None:
        x @ mT(w1)
        w2 @ mT(h)
        dout @ h
        mT(dh) @ x

    def step() -> None:
        batched.mlp_step(be.xp, p, x, y, upd, False)

    now = be.clock if be.device.startswith("cuda") else time.process_time
    out = []
    for fn, flops in ((matmuls, 2 * (2 * BATCH * N * hidden + 2 * BATCH * hidden)), (step, step_flops(hidden))):
        fn()
        loops = max(1, int(2e8 // (runs * flops)))  # ~0.2 GFLOP a timing
        best = float("inf")
        for _ in range(repeats + 2):
            t0 = now()
            for _ in range(loops):
                fn()
            best = min(best, (now() - t0) / loops)
        out.append(runs * flops / best)
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,16,64,256")
    ap.add_argument("--hidden", default="50,200")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--devices", default="cpu,torch_cpu")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sections", default="abc")
    ap.add_argument("--kernel-sizes", default="16,64", help="R of section (c)")
    ap.add_argument("--gpu-sizes", default="1024,4096,16384", help="R of section (d), on the GPU")
    ap.add_argument("--gpu-whole-sizes", default="1024,4096", help="R of section (d)'s whole solves")
    ap.add_argument("--gpu-rng", default="counter,host", help="device.rng of section (d)'s GPU runs")
    ap.add_argument("--energy-sizes", default="1,16,256,4096", help="R of section (e)")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    devices = a.devices.split(",")
    try:
        import torch  # noqa: PLC0415 - only to ask for a GPU

        if torch.cuda.is_available() and "cuda" not in devices:
            devices.append("cuda")
    except ImportError:
        pass
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        if "a" in a.sections:
            print(
                f"(a) {a.epochs} epochs a run, threads={a.threads}: per-run speed-up vs solo (median of "
                f"{a.repeats} paired rounds, range), FLOP/s / matmul peak"
            )
            print(
                f"{'device':10} {'dtype':8} {'hidden':>6} {'solo ms':>8} {'peak GF/s':>9}  "
                + "  ".join(f"R={r:<22}" for r in sizes)
            )
            for device in devices:
                for dtype in a.dtypes.split(","):
                    top = peak(device, dtype)
                    for hidden in (int(h) for h in a.hidden.split(",")):
                        work = a.epochs * flops_per_epoch(hidden)
                        solo_js = [[j] for j in build(device, dtype, hidden, a.threads, range(3), a.epochs)]
                        seconds(solo_js[0], False)  # warm-up (torch's lazy init)
                        cells, solos = [], []
                        for r in sizes:
                            js = build(device, dtype, hidden, a.threads, range(r), a.epochs)
                            seconds(js, True)
                            solo, ts = solo_against(solo_js, 1, lambda js=js: seconds(js, True), a.repeats)
                            solos += solo
                            t = statistics.median(ts)
                            cells.append(f"{cell(ratios(solo, [x / r for x in ts]))} {work * r / t / top:4.0%}")
                        print(
                            f"{device:10} {dtype:8} {hidden:6d} {statistics.median(solos) * 1e3:8.1f} "
                            f"{top / 1e9:9.1f}  " + "  ".join(f"{c:24}" for c in cells)
                        )
        if "c" in a.sections:
            ks = [int(r) for r in a.kernel_sizes.split(",")]
            print("(c) ceiling, FLOP/s / matmul peak: the step's batched matmuls alone | the whole step, same shapes")
            print(f"{'device':10} {'dtype':8} {'hidden':>6} {'peak GF/s':>9}  " + "  ".join(f"R={r:<12}" for r in ks))
            for device in devices:
                for dtype in a.dtypes.split(","):
                    top = peak(device, dtype)
                    for hidden in (int(h) for h in a.hidden.split(",")):
                        cells = [kernels(device, dtype, hidden, r, a.threads, a.repeats) for r in ks]
                        print(
                            f"{device:10} {dtype:8} {hidden:6d} {top / 1e9:9.1f}  "
                            + "  ".join(f"{mm / top:4.0%} | {st / top:4.0%}   " for mm, st in cells),
                            flush=True,
                        )
        if "d" in a.sections and "cuda" in devices:
            gpu_against_numpy(a)
        if "e" in a.sections and "cuda" in devices:
            energy_per_run(a)
        if "b" in a.sections:
            print(
                "(b) whole solves to each run's own early stop, 16 seeds: 16 solo solves / one batch of 16, "
                f"{a.repeats} paired rounds"
            )
            for device in devices:
                for dtype in a.dtypes.split(","):
                    for hidden in (int(h) for h in a.hidden.split(",")):
                        js = build(device, dtype, hidden, a.threads, range(16), None)
                        seconds(js[:1], False)
                        seconds(js, True)
                        solos, batches = solo_against([js], 1, lambda js=js: seconds(js, True), a.repeats)
                        solo, batch = statistics.median(solos), statistics.median(batches)
                        outs = type(js[0].method).solve_batch([j.method for j in js], [j.ctx for j in js])
                        epochs = [o.epochs for o in outs]
                        print(
                            f"{device:10} {dtype:8} hidden={hidden:<4d} solo {solo * 1e3 / 16:7.1f} ms/run, "
                            f"batch {batch * 1e3 / 16:7.1f} ms/run (medians): {spread(ratios(solos, batches))} "
                            f"(epochs {min(epochs)}-{max(epochs)})"
                        )


def gpu_against_numpy(a: argparse.Namespace) -> None:
    """(d) R runs at once on the GPU against one run alone in numpy on one CPU thread (the CPU's best solo run,
    seed 000's comparison): per-run solve time and its ratio. Fixed epochs (the same work), then whole solves of
    R seeds to their own early stops against the mean solo solve of 16 of those seeds, each R in --repeats paired
    rounds; the evaluation after the clock (each run's curves, per run and epoch) is timed apart on 64 of the
    runs."""
    sizes, whole_sizes = ([int(r) for r in x.split(",")] for x in (a.gpu_sizes, a.gpu_whole_sizes))
    print(f"(d) GPU batch of R against the solo numpy run on one CPU thread ({a.epochs} epochs a run | whole solves)")
    for dtype in a.dtypes.split(","):
        for hidden in (int(h) for h in a.hidden.split(",")):
            cpu = build("cpu", dtype, hidden, 1, range(16), None)
            fixed = [[fixed_epochs(j, a.epochs)] for j in cpu[:3]]
            for rng in a.gpu_rng.split(","):
                gpu_rows(a, dtype, hidden, rng, fixed, cpu, sizes, whole_sizes)


def gpu_rows(a, dtype: str, hidden: int, rng: str, fixed: list, cpu: list, sizes, whole_sizes) -> None:
    """Section (d)'s rows of one device.rng: the solo numpy runs (`fixed`: at fixed epochs, one a timing; `cpu`: 16
    whole solves) paired round by round with the GPU's batch."""
    gpu = build("cuda", dtype, hidden, 1, range(max(sizes + whole_sizes)), None, f"device.rng={rng}")
    seconds(gpu[:64], True)  # warm-up: lazy init, the allocator's first blocks
    cells, solos = [], []
    for r in sizes:
        js = [fixed_epochs(j, a.epochs) for j in gpu[:r]]
        solo, ts = solo_against(fixed, 1, lambda js=js: seconds(js, True), a.repeats)
        solos += solo
        cells.append(
            f"R={r}: {statistics.median(ts) / r * 1e6:6.1f} us/run {cell(ratios(solo, [t / r for t in ts]), 0)}"
        )
    print(
        f"fixed {dtype:8} hidden={hidden:<4d} rng={rng:7} numpy solo {statistics.median(solos) * 1e3:6.2f} ms/run "
        "(median) | " + " | ".join(cells),
        flush=True,
    )
    for r in whole_sizes:
        js, now = gpu[:r], gpu[0].backend.clock
        whole: list = []

        def batch(js=js, now=now) -> float:
            t0 = now()
            whole[:] = type(js[0].method).solve_batch([j.method for j in js], [j.ctx for j in js])
            return now() - t0  # one whole solve, each run to its own early stop

        solo, ts = solo_against([cpu], 16, batch, a.repeats)
        outs, t, solo_whole = whole, statistics.median(ts), statistics.median(solo)
        t0 = time.perf_counter()
        for o in outs[:64]:
            o.finalize()
        ev = (time.perf_counter() - t0) / 64
        epochs = [o.epochs for o in outs]
        print(
            f"whole {dtype:8} hidden={hidden:<4d} rng={rng:7} numpy solo {solo_whole * 1e3:6.2f} ms/run | R={r}: "
            f"{t / r * 1e6:7.1f} us/run {cell(ratios(solo, [x / r for x in ts]), 0)} (medians, range; epochs "
            f"{min(epochs)}-{max(epochs)}; "
            f"curves after the clock {ev * 1e3:.1f} ms/run)",
            flush=True,
        )


def energy_per_run(a: argparse.Namespace) -> None:
    """(e) measured Joules per run of a batch of R, at fixed epochs, with the per-run proxies beside them."""
    from sweep.energy.meter import meter_solve  # noqa: PLC0415 - section (e) only

    sizes = [int(r) for r in a.energy_sizes.split(",")]
    print(f"(e) measured energy per run, R runs at once on the GPU ({a.epochs} epochs a run)")
    for dtype in a.dtypes.split(","):
        for hidden in (int(h) for h in a.hidden.split(",")):
            # the per-run proxies: one run's whole traced solve on the GPU hierarchy, as sweeps=energy_joules traces
            on = ("tracker=energy", "tracker.hierarchy=gpu", "tracker.scope=all_steps")
            (traced,) = build("cpu", "float64", hidden, 1, [0], a.epochs, *on)
            traced.method.solve(traced.ctx)
            proxies = traced.tracker.summarize(traced.ctx.trace).metrics
            gpu = [fixed_epochs(j, a.epochs) for j in build("cuda", dtype, hidden, 1, range(max(sizes)), None)]
            device = compose("config", overrides=["device=cuda"]).device
            for r in sizes:
                js = gpu[:r]
                solve = lambda: type(js[0].method).solve_batch([j.method for j in js], [j.ctx for j in js])  # noqa: E731
                solve()  # warm-up
                m, tags = meter_solve(solve, device, js[0].backend.clock, 2.0)
                if not m:
                    print(f"R={r}: no measurement: {tags.get('energy.meter_reason')}", flush=True)
                    continue
                print(
                    f"{dtype:8} hidden={hidden:<4d} R={r:<5d} {m['energy_measured_j'] / r * 1e3:9.3f} mJ/run net "
                    f"({m['energy_measured_gross_j'] / r * 1e3:9.3f} gross, idle {m['energy_idle_w']:.0f} W, "
                    f"{int(m['energy_measure_repeats'])} repeats, calibration {m['energy_calibration_ratio']:.3f}) | "
                    f"per-run proxies: dmd {proxies['dmd']:.4g} energy_pj {proxies['energy_pj']:.4g}",
                    flush=True,
                )


def fixed_epochs(j: job.Job, epochs: int) -> job.Job:
    """The job with its method set to train exactly ``epochs`` epochs (its target out of reach)."""
    return dataclasses.replace(j, method=dataclasses.replace(j.method, max_epochs=epochs, target_accuracy=2.0))


if __name__ == "__main__":
    t0 = time.perf_counter()
    on_device.run(main)
    print(f"total {time.perf_counter() - t0:.0f} s")
