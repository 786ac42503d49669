"""The training loop of the character models (gpt, mlp_lm), read top to bottom as nanoGPT's train.py: build the
model and AdamW, then steps of a random batch (forward, loss, backward, clip, step) at the schedule's learning rate,
an evaluation on the validation blocks every `eval_interval` steps, and a stop at the target, `max_steps` or the
time budget. What is timed is this loop (its evaluations are its stopping checks, as SGD's per-epoch accuracy);
what comes after the clock (Outcome.evaluate) is the training accuracy and the traced steps.

The memory figures come from ONE traced training step taken after training on a copy of the model and optimizer
(forward, backward, optimizer; traced by sweep.trace.auto.TorchTracer), preceded by one traced step that leaves
parameters, optimizer state and batch written, so the measured step's reads have distances, as every step of the
run but the first. A step's events do not depend on the weights or the data, so the run's figures are the step's
times the steps it took (sweep.trackers.per_step); every tracker.scope traces this same step.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any, Callable

import numpy as np
import torch
from torch.nn import functional as F

from sweep.backend import Backend
from sweep.methods.base import Context, Outcome
from sweep.problems.chars import Corpus
from sweep.trace.trace import Trace

EVAL_FLOATS = 1 << 22  # logits per evaluation chunk (blocks x block_size x vocab): 16 MB of float32


def train(method: Any, ctx: Context) -> Outcome:
    be, data = ctx.backend, ctx.data
    model, opt = build(method, data, ctx.problem.seed, be)
    forward = be.compiled(model.forward)  # torch.compile / autocast as device.compile / device.autocast say
    val = [torch.from_numpy(a).to(be.device) for a in data.val_blocks()]
    rng = np.random.RandomState(ctx.problem.seed)  # the batches' order, drawn on the host like every method's data
    curves: dict[str, list[float]] = {"train_loss": [], "test_accuracy": [], "test_loss": [], "eval_step": []}
    step_losses: list[torch.Tensor] = []  # each step's loss, left on the device: read at evaluations
    steps, acc, bpc = 0, 0.0, math.inf
    t0 = be.clock()
    while steps < method.max_steps:
        for group in opt.param_groups:
            group["lr"] = method.lr_at(steps)
        x, y = batch(data, rng, method.batch_size, be.device)
        step_losses.append(step(model, forward, opt, x, y, method.grad_clip).detach())
        steps += 1
        out_of_time = time.perf_counter() - t0 >= method.time_budget_s
        if steps % method.eval_interval == 0 or steps == method.max_steps or out_of_time:
            acc, bpc = scores(model, forward, *val)
            since = int(curves["eval_step"][-1]) if curves["eval_step"] else 0  # the steps since the last evaluation
            curves["train_loss"].append(float(torch.stack(step_losses[since:]).mean()))
            curves["test_accuracy"].append(acc)
            curves["test_loss"].append(bpc)
            curves["eval_step"].append(steps)  # the training step each point is at (the plots' x axis)
            if acc >= method.target_accuracy:
                break
        if out_of_time:
            break
    tokens = steps * method.batch_size * data.block_size

    def evaluate(o: Outcome) -> None:
        o.curves["train_loss_step"] = torch.stack(step_losses).tolist()  # every step's (MLflow's step: the step's)
        o.train_accuracy = scores(model, forward, *(torch.from_numpy(a).to(be.device) for a in data.train_blocks()))[0]
        if ctx.trace.enabled:
            o.step_traces = traced_steps(model, opt, method, data, ctx)

    return Outcome(
        accuracy=acc,
        epochs=tokens / len(data.train),  # passes over the training text
        steps=steps,
        curves=curves,
        extra={
            "bits_per_char": bpc,
            "train_loss": curves["train_loss"][-1],
            "steps": steps,
            "tokens": tokens,  # sweep.job: tokens_per_s = tokens / wall_clock_s
            "reached_target": float(acc >= method.target_accuracy),
            **data.sizes(),
        },
        evaluate=evaluate,
    )


def build(method: Any, data: Corpus, seed: int, be: Backend) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The model, its weights drawn from problem.seed + 1 on the CPU (the same on every device), and its AdamW."""
    torch.manual_seed(seed + 1)  # the weights, and dropout's masks in training
    model = method.model(data.vocab_size, data.block_size)
    model = model.to(device=be.device, dtype=getattr(torch, be.dtype))
    return model, adamw(model, method, be.device)


def adamw(model: torch.nn.Module, method: Any, device: str) -> torch.optim.Optimizer:
    """nanoGPT's configure_optimizers: weight decay on the matrices and embeddings, none on norms and biases."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": method.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    fused = {"fused": True} if device.startswith("cuda") else {}  # one kernel for every parameter (nanoGPT on cuda)
    return torch.optim.AdamW(
        [g for g in groups if g["params"]], lr=method.lr, betas=(method.beta1, method.beta2), **fused
    )


def batch(data: Corpus, rng: np.random.RandomState, batch_size: int, device: str) -> tuple[torch.Tensor, ...]:
    x, y = data.batch(rng, batch_size)
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)


def step(
    model: torch.nn.Module, forward: Callable, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, clip: float
) -> torch.Tensor:
    """One training step: forward, cross-entropy over every position, backward, clip, AdamW; returns the loss."""
    logits = forward(x)
    loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


@torch.no_grad()
def scores(model: torch.nn.Module, forward: Callable, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(character accuracy, bits per character) of the model's next-character predictions on blocks (x, y)."""
    model.eval()
    rows = max(1, EVAL_FLOATS // (x.shape[1] * model.lm_head.out_features))
    right, nats = torch.zeros((), device=x.device), torch.zeros((), device=x.device, dtype=torch.float64)
    for i in range(0, len(x), rows):
        logits = forward(x[i : i + rows]).float()
        right += (logits.argmax(-1) == y[i : i + rows]).sum()
        nats += F.cross_entropy(logits.flatten(0, 1), y[i : i + rows].flatten(), reduction="sum").double()
    model.train()
    return float(right) / y.numel(), float(nats) / y.numel() / math.log(2)


def warm_up(method: Any, ctx: Context) -> None:
    """What the timed solve would pay on its first steps (lazy init, torch.compile's graphs for the training and
    evaluation shapes), paid here on a throwaway model: two steps and one evaluation."""
    be, data = ctx.backend, ctx.data
    model, opt = build(method, data, ctx.problem.seed, be)
    forward = be.compiled(model.forward)
    rng = np.random.RandomState(ctx.problem.seed)
    for _ in range(2):
        step(model, forward, opt, *batch(data, rng, method.batch_size, be.device), method.grad_clip)
    scores(model, forward, *(torch.from_numpy(a).to(be.device) for a in data.val_blocks()))


def traced_steps(
    model: torch.nn.Module, opt: torch.optim.Optimizer, method: Any, data: Corpus, ctx: Context
) -> dict[str, Trace]:
    """Two training steps traced into ctx.trace on copies of the trained model and optimizer: the one that finds
    parameters and AdamW's moments written (the tracer writes them as it opens) and writes its batch, then the
    measured step. Returns the two as Traces of their own ({"before", "step"}): events and operation counts."""
    from sweep.trace.auto import TorchTracer  # noqa: PLC0415 - the trace machinery: only for a traced run

    be, trace = ctx.backend, ctx.trace
    model = copy.deepcopy(model)
    twin = adamw(model, method, be.device)
    twin.load_state_dict(opt.state_dict())
    names = {f"param.{n}": p for n, p in model.named_parameters()}
    for n, p in model.named_parameters():
        names.update({f"adamw.{n}.{k}": s for k, s in twin.state[p].items() if torch.is_tensor(s) and s.dim()})
    rng = np.random.RandomState(ctx.problem.seed + 2)
    batches = [batch(data, rng, method.batch_size, be.device) for _ in range(2)]  # drawn before: not the step's
    trace.end_step()
    out = []
    with TorchTracer(trace, names) as tracer:
        for _ in range(2):
            x, y = batches.pop(0)
            before, ops = len(trace.seq), dict(trace.compute_ops)
            tracer.name(x, "x")  # the batch, loaded from the host
            tracer.name(y, "y")
            step(model, model.forward, twin, x, y, method.grad_clip)  # eager: the trace is of the ops as written
            tracer.end_step()
            del x, y  # the next batch takes their names
            out.append(trace.since(before, ops))
    return dict(zip(("before", "step"), out))
