"""The gpt's training throughput inside `sweep` against a plain PyTorch loop of the same model, optimizer and data,
and what tracking a run costs; the preset char_lm's gpt arm by default (n_embd 64, 300 steps, an evaluation every 50).

    .venv/bin/python benchmarks/bench_char_lm.py [--device cpu|cuda] [--repeats 3] [--threads 1] [k=v ...]

(a) Throughput. `sweep`: the job's `tokens_per_s` (tokens / wall_clock_s: the timed solve, after its warm-up) of
`python -m sweep problem=chars method=gpt tracker=none ...`. Plain: the loop below, written as nanoGPT's train.py
is (schedule, batch, forward, loss, backward, clip, AdamW; an evaluation of the same validation blocks at the same
interval), on a model built from the same class and seed, AdamW grouped the same way, batches drawn by the same
RandomState. Target: sweep / plain >= 0.9. Each repeat runs the two back to back (which goes first alternates), and
its ratio is one pair's; the figure is the median of the paired ratios with their range (a best-of-N of each side
pairs a lucky sweep run with a lucky plain run of other moments: on a shared machine that is noise, not speed).
(b) Tracking. The same job with tracker=energy (tracker.meter=none): its traced steps (Outcome.evaluate's, after
the clock) and the tracker's summaries, each timed on the job's path, as a fraction of the run's training time
(wall_clock_s). Target: <= 10%. The median share over the repeats, with its range.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import on_device
import torch
from torch.nn import functional as F

from sweep import job
from sweep.config.schema import register_configs
from sweep.methods.lm import train as lm_train
from sweep.trackers.energy import EnergyTracker

ARM = ("problem=chars", "method=gpt", "method.n_embd=64", "method.max_steps=300", "method.eval_interval=50")


def compose(*overrides: str):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from sweep.paths import CONF_DIR

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose("config", overrides=list(overrides))


def plain_loop(cfg) -> float:
    """Tokens per second of a plain PyTorch loop training the job's model on the job's data (after 2 warm steps)."""
    m, p = job.build(cfg.method), job.build(cfg.problem)
    data = p.generate()
    dev, dtype = cfg.device.torch_device, getattr(torch, cfg.device.dtype)
    torch.manual_seed(p.seed + 1)
    model = m.model(data.vocab_size, data.block_size).to(device=dev, dtype=dtype)
    opt = lm_train.adamw(model, m, dev)
    xv, yv = (torch.from_numpy(a).to(dev) for a in data.val_blocks())
    rng = np.random.RandomState(p.seed)

    def get_batch():
        x, y = data.batch(rng, m.batch_size)
        return torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)

    def train_step(lr: float):
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = get_batch()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), m.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)

    @torch.no_grad()
    def estimate():
        model.eval()
        rows = max(1, lm_train.EVAL_FLOATS // (xv.shape[1] * data.vocab_size))
        right, nats = 0, 0.0
        for i in range(0, len(xv), rows):
            logits, y = model(xv[i : i + rows]), yv[i : i + rows]
            right += int((logits.argmax(-1) == y).sum())
            nats += float(F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum"))
        model.train()
        return right / yv.numel(), nats / yv.numel()

    for _ in range(2):  # warm: lazy init, as the job's warm-up
        train_step(m.lr)
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for it in range(m.max_steps):
        train_step(m.lr_at(it))
        if (it + 1) % m.eval_interval == 0 or it + 1 == m.max_steps:
            estimate()
    sync()
    return m.max_steps * m.batch_size * data.block_size / (time.perf_counter() - t0)


@contextmanager
def timed(owner, name: str, spent: list[float]) -> Iterator[None]:
    """Add the seconds of every call of owner.name to spent[0] while inside."""
    original = getattr(owner, name)

    def call(*a, **kw):
        t0 = time.perf_counter()
        try:
            return original(*a, **kw)
        finally:
            spent[0] += time.perf_counter() - t0

    setattr(owner, name, call)
    try:
        yield
    finally:
        setattr(owner, name, original)


def tracking(cfg) -> tuple[float, float, float]:
    """(training seconds, traced-steps seconds, summaries seconds) of one tracked job."""
    step, summary = [0.0], [0.0]
    with timed(lm_train, "traced_steps", step), timed(EnergyTracker, "summarize_each", summary):
        r = job.run(cfg)
    return r.metrics["wall_clock_s"], step[0], summary[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch's CPU threads (device.threads)")
    ap.add_argument("overrides", nargs="*", help="more job overrides (k=v), after the preset's gpt arm")
    a = ap.parse_args()
    device = ("device=cuda", "device.local_gpu=true") if a.device == "cuda" else ("device=torch_cpu",)
    base = (*ARM, *device, "device.dtype=float32", f"device.threads={a.threads}", *a.overrides)
    torch.set_num_threads(a.threads)
    untracked = compose(*base, "tracker=none")
    tracked = compose(
        *base, "tracker=energy", "tracker.meter=none", f"tracker.hierarchy={'gpu' if a.device == 'cuda' else 'cpu'}"
    )
    ratios, shares = [], []
    for i in range(a.repeats):
        if i % 2 == 0:  # which runs first alternates: a machine that gets busier or quieter favours neither
            sweep_tps = job.run(untracked).metrics["tokens_per_s"]
            plain_tps = plain_loop(untracked)
        else:
            plain_tps = plain_loop(untracked)
            sweep_tps = job.run(untracked).metrics["tokens_per_s"]
        train_s, step_s, summary_s = tracking(tracked)
        ratios.append(sweep_tps / plain_tps)
        shares.append((step_s + summary_s) / train_s if train_s > 0 else math.inf)
        print(f"repeat {i}: sweep {sweep_tps:,.0f} tokens/s, plain {plain_tps:,.0f}: {ratios[-1]:.3f}x; tracked run: "
              f"{train_s:.2f} s training, {step_s:.3f} s traced steps, {summary_s:.3f} s summaries: "
              f"{shares[-1]:.1%}", flush=True)  # fmt: skip
    print(f"(a) throughput, {a.device}: sweep / plain loop, median of {len(ratios)} paired ratios "
          f"{statistics.median(ratios):.3f}x (range {min(ratios):.3f}-{max(ratios):.3f}; target >= 0.9x)")  # fmt: skip
    print(f"(b) tracking, {a.device}: traced steps and summaries over training, median {statistics.median(shares):.1%} "
          f"(range {min(shares):.1%}-{max(shares):.1%}; target <= 10%)")  # fmt: skip


if __name__ == "__main__":
    on_device.run(main)
