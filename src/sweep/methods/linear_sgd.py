"""SGD's model for integer labels (problem.loss == "squared", sparse_sum): a linear model out = x w + b trained
on the squared error 1/2 (out - y)^2 with mini-batch SGD and weight decay, as in the group's harness (lr 0.1,
wd 0.01, batch 32: method=sgd's defaults). The prediction is the problem's decision on out (sparse_sum: the
nearest integer). method=sgd picks this model through SGD.models, keyed by the problem's loss.

The sum's exact model is w = 1 on the secret bits, b = 0; weight decay shrinks it to 1 / (1 + wd), which
still rounds to the right label for |y| <= k < (1 + wd) / (2 wd). Trace and operation counts follow the
arithmetic (specs of the MLP step, for one layer): forward, residual, update of w and b.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from sweep.methods.base import Context, Outcome
from sweep.methods.epoch_log import EpochLog, hidden_progress
from sweep.trace.scope import Scope
from sweep.trace.trace import NULL_TRACE, Trace

Params = dict[str, Any]


class Hyper(Protocol):
    """The hyper-parameters the linear model takes from method=sgd (sweep.methods.sgd.SGD)."""

    lr: float
    wd: float
    batch_size: int
    max_epochs: int
    target_accuracy: float


def linear_step(p: Params, x, y, lr: float, keep: float, trace: Trace) -> None:
    """One mini-batch step on 1/2 mean (x w + b - y)^2; p["w"] (n,), p["b"] (1,) updated in place."""
    B, n = x.shape
    trace.read("x", x)
    trace.read("w", n)
    trace.read("b", 1)
    out = x @ p["w"]
    out += p["b"]
    trace.compute("fma", B * n)
    trace.compute("add", B)
    trace.write("out", B)
    trace.read("out", B)
    trace.read("y", B)
    out -= y
    out *= lr / B  # dout: the residual times the step size, folded in once (B floats, not n)
    trace.compute("add", B)
    trace.compute("mul", B)
    trace.write("dout", B)
    trace.read("dout", B)
    trace.read("x", x)
    trace.read("w", n)
    if keep != 1.0:
        p["w"] *= keep
        trace.compute("mul", n)
    p["w"] -= out @ x
    trace.compute("fma", B * n)
    trace.write("w", n)
    trace.read("dout", B)
    trace.read("b", 1)
    p["b"] -= out.sum(0, keepdims=True)
    trace.compute("add", B)
    trace.write("b", 1)


def train_linear(sgd: Hyper, ctx: Context) -> Outcome:
    """Train the linear model with sgd's hyper-parameters (hidden and the variant do not apply)."""
    be, xp, d, prob = ctx.backend, ctx.backend.xp, ctx.data, ctx.problem
    n = prob.n_bits
    rng = np.random.RandomState(prob.seed + 1)  # the batch order, seeded as the MLP's
    p = {"w": be.asarray(np.zeros(n)), "b": be.asarray(np.zeros(1))}
    x, y = be.asarray(d.x_train), be.asarray(d.y_train)
    xt, yt = be.asarray(d.x_test), be.asarray(d.y_test)
    keep = 1.0 - sgd.lr * sgd.wd

    def accuracy(q: Params, xa, ya) -> float:
        out = xa @ q["w"] + q["b"]
        return float(xp.mean(xp.astype(prob.decide(xp, out) == ya, xa.dtype)))

    def loss(q: Params, xa, ya) -> float:
        """The trained objective 1/2 mean (x w + b - y)^2, without weight decay (as the MLP's hinge curves)."""
        return float(xp.mean((xa @ q["w"] + q["b"] - ya) ** 2) / 2)

    p0 = {"w": p["w"] * 1.0}

    def measure(q: Params) -> dict[str, float]:
        return {
            "train_accuracy": accuracy(q, x, y),
            "test_accuracy": accuracy(q, xt, yt),
            "train_loss": loss(q, x, y),
            "test_loss": loss(q, xt, yt),
            **hidden_progress(xp, q, p0, ("w",)),
        }

    def single_step(q: Params, i: int) -> None:
        """A traced single-sample step on training sample i, on a copy of the weights."""
        q = {k: v * 1.0 for k, v in q.items()}
        ctx.trace.write("w", n)
        ctx.trace.write("b", 1)
        ctx.trace.write("x", n)
        ctx.trace.write("y", 1)
        linear_step(q, x[i : i + 1], y[i : i + 1], sgd.lr, keep, ctx.trace)

    if ctx.traces(Scope.INIT_SAMPLE0):
        single_step(p, 0)
    all_steps = ctx.traces(Scope.ALL_STEPS)
    log, m, bs, epochs = EpochLog(), x.shape[0], sgd.batch_size, sgd.max_epochs
    for epoch in range(sgd.max_epochs):
        perm = be.index(rng.permutation(m))
        xs, ys = x[perm], y[perm]
        epoch_trace = Trace() if all_steps else NULL_TRACE
        if all_steps and epoch == 0:
            epoch_trace.write("w", n)
            epoch_trace.write("b", 1)
        for s in range(0, m, bs):
            xb, yb = xs[s : s + bs], ys[s : s + bs]
            epoch_trace.write("x", xb)
            epoch_trace.write("y", yb)
            linear_step(p, xb, yb, sgd.lr, keep, epoch_trace)
            epoch_trace.end_step()  # one segment per step (sweep.trace.trace)
        if all_steps:
            ctx.trace.extend(epoch_trace)
            log.traces.append(epoch_trace)
        log.record(p, measure)
        if accuracy(p, xt, yt) >= sgd.target_accuracy:
            epochs = epoch + 1
            break
    if ctx.traces(Scope.PUBLISHED):
        # the MLP's protocol, for this model: the first training sample still predicted wrong (else sample 0)
        wrong = np.flatnonzero(be.to_numpy(prob.decide(xp, x @ p["w"] + p["b"]) != y))
        single_step(p, int(wrong[0]) if wrong.size else 0)

    def evaluate(o: Outcome) -> None:
        o.accuracy = accuracy(p, xt, yt)
        o.curves = log.curves()
        o.train_accuracy = o.curves["train_accuracy"][-1]

    w = be.to_numpy(p["w"])
    found = tuple(sorted(int(i) for i in np.argsort(-np.abs(w), kind="stable")[: prob.k_sparse]))
    traces = {f"epoch_{i + 1}": t for i, t in enumerate(log.traces)}
    return Outcome(epochs=epochs, secret_found=found, traces=traces, evaluate=evaluate)
