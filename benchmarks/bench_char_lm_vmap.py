"""Why the gpt does not batch runs (docs/chars.md, "Batching several runs as one program"): R gpts trained as one
program with torch.func (stack_module_state, vmap of grad over functional_call, one AdamW over the stacked
parameters) against each trained alone, on the same initial weights and batches. Prints the time a run takes
each way and how far the batched runs end from their solo runs (largest parameter difference, run 0's validation
accuracy both ways).

    .venv/bin/python benchmarks/bench_char_lm_vmap.py [--runs 4] [--steps 300] [--n-embd 64] [--repeats 3]

Each repeat trains the R runs both ways back to back (which goes first alternates: paired.rounds); the speed-up
is the median of the repeats' solo / batched ratios with their range, the seconds a run the medians.

A plain loop each way (constant learning rate, no clipping or weight decay): what differs is only how the runs are
computed, alone or stacked. One thread (the char_lm preset's setting).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import numpy as np
import torch
from paired import ratios, rounds, spread
from torch.func import functional_call, grad, stack_module_state, vmap
from torch.nn import functional as F

from sweep.methods.lm.gpt_model import GPTModel
from sweep.problems.chars import Chars


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--n-embd", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="paired measurements of both ways")
    a = ap.parse_args()
    torch.set_num_threads(1)
    data = Chars().generate()
    seeds = list(range(42, 42 + a.runs))

    def model(seed: int) -> GPTModel:
        torch.manual_seed(seed + 1)
        return GPTModel(data.vocab_size, data.block_size, 2, 4, a.n_embd, 0.0)

    batches = [[data.batch(rng, 32) for _ in range(a.steps)] for rng in (np.random.RandomState(s) for s in seeds)]

    def solo(i: int) -> dict[str, torch.Tensor]:
        m = model(seeds[i])
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.0)
        for x, y in batches[i]:
            F.cross_entropy(m(torch.from_numpy(x)).flatten(0, 1), torch.from_numpy(y).flatten()).backward()
            opt.step()
            opt.zero_grad()
        return {n: p.detach() for n, p in m.named_parameters()}

    def batched() -> dict[str, torch.Tensor]:
        models = [model(s) for s in seeds]
        params, buffers = stack_module_state(models)
        base = copy.deepcopy(models[0]).to("meta")
        opt = torch.optim.AdamW(list(params.values()), lr=1e-2, weight_decay=0.0)

        def loss(p, b, x, y):  # the tied head named too: functional_call would not find it on the meta model
            logits = functional_call(base, ({**p, "lm_head.weight": p["wte.weight"]}, b), (x,))
            return F.cross_entropy(logits.flatten(0, 1), y.flatten())

        grads_of = vmap(grad(loss))
        for t in range(a.steps):
            x = torch.from_numpy(np.stack([batches[i][t][0] for i in range(a.runs)]))
            y = torch.from_numpy(np.stack([batches[i][t][1] for i in range(a.runs)]))
            grads = grads_of(params, buffers, x, y)
            for name, p in params.items():
                p.grad = grads[name]
            opt.step()
        return {n: p.detach() for n, p in params.items()}

    solo(0)  # warm: lazy init
    kept: dict[str, object] = {}

    def timed(name: str, train) -> float:
        """Seconds a run of one way's training; its parameters kept (the last repeat's are compared)."""
        t0 = time.perf_counter()
        kept[name] = train()
        return (time.perf_counter() - t0) / a.runs

    got = rounds(
        {
            "solo": lambda: timed("solo", lambda: [solo(i) for i in range(a.runs)]),
            "batch": lambda: timed("batch", batched),
        },
        a.repeats,
    )
    alone, stacked = kept["solo"], kept["batch"]
    t_solo, t_batch = statistics.median(got["solo"]), statistics.median(got["batch"])
    diff = max(float((stacked[n][i] - alone[i][n]).abs().max()) for i in range(a.runs) for n in alone[i])
    xv, yv = (torch.from_numpy(v) for v in data.val_blocks())

    @torch.no_grad()
    def accuracy(params: dict[str, torch.Tensor]) -> float:
        m = model(seeds[0])
        for n, p in m.named_parameters():
            p.copy_(params[n])
        return float((m(xv).argmax(-1) == yv).float().mean())

    print(
        f"R={a.runs}, {a.steps} steps, n_embd {a.n_embd}: solo {t_solo:.2f} s a run, batched {t_batch:.2f} s a run "
        f"(medians; solo / batched {spread(ratios(got['solo'], got['batch']))}); largest parameter difference "
        f"{diff:.3g}; run 0's validation accuracy "
        f"{accuracy(alone[0]):.4f} alone, {accuracy({n: v[0] for n, v in stacked.items()}):.4f} batched"
    )


if __name__ == "__main__":
    main()
