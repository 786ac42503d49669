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

from sweep.methods import batched
from sweep.methods.base import Context, Outcome
from sweep.methods.counter_rng import method_rng
from sweep.methods.epoch_log import EpochLog, hidden_progress, per_row
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


class LinearRun:
    """One run's pieces outside the training loop: its data on the backend, the metrics, the traced single step
    and the outcome. The solo loop (train_linear) and the batched one (train_linear_runs) share them."""

    def __init__(self, sgd: Hyper, ctx: Context) -> None:
        be, d = ctx.backend, ctx.data
        self.sgd, self.ctx, self.xp, self.prob = sgd, ctx, be.xp, ctx.problem
        self.x, self.y = be.asarray(d.x_train), be.asarray(d.y_train)
        self.xt, self.yt = be.asarray(d.x_test), be.asarray(d.y_test)
        self.keep = 1.0 - sgd.lr * sgd.wd
        self.p0 = {"w": be.asarray(np.zeros(self.prob.n_bits))}

    def init(self) -> Params:
        return {"w": self.p0["w"] * 1.0, "b": self.ctx.backend.asarray(np.zeros(1))}

    def accuracy(self, q: Params, xa, ya) -> float:
        out = xa @ q["w"] + q["b"]
        return float(self.xp.mean(self.xp.astype(self.prob.decide(self.xp, out) == ya, xa.dtype)))

    def loss(self, q: Params, xa, ya) -> float:
        """The trained objective 1/2 mean (x w + b - y)^2, without weight decay (as the MLP's hinge curves)."""
        return float(self.xp.mean((xa @ q["w"] + q["b"] - ya) ** 2) / 2)

    def measure(self, q: Params) -> dict[str, float]:
        x, y, xt, yt = self.x, self.y, self.xt, self.yt
        return {
            "train_accuracy": self.accuracy(q, x, y),
            "test_accuracy": self.accuracy(q, xt, yt),
            "train_loss": self.loss(q, x, y),
            "test_loss": self.loss(q, xt, yt),
            **hidden_progress(self.xp, q, self.p0, ("w",)),
        }

    def single_step(self, q: Params, i: int) -> None:
        """A traced single-sample step on training sample i, on a copy of the weights."""
        q, n = {k: v * 1.0 for k, v in q.items()}, self.prob.n_bits
        with self.ctx.recording(loaded={**q, "x": self.x[i : i + 1], "y": self.y[i : i + 1]}) as r:
            r.trace.write("w", n)
            r.trace.write("b", 1)
            r.trace.write("x", n)
            r.trace.write("y", 1)
            linear_step({k: r[k] for k in q}, r["x"], r["y"], self.sgd.lr, self.keep, r.trace)

    def trace_published(self, q: Params) -> None:
        """The MLP's protocol, for this model: the first training sample still predicted wrong (else sample 0)."""
        if self.ctx.traces(Scope.PUBLISHED):
            out = self.x @ q["w"] + q["b"]
            wrong = np.flatnonzero(self.ctx.backend.to_numpy(self.prob.decide(self.xp, out) != self.y))
            self.single_step(q, int(wrong[0]) if wrong.size else 0)

    def outcome(self, q: Params, epochs: int, log: EpochLog) -> Outcome:
        def evaluate(o: Outcome) -> None:
            o.accuracy = self.accuracy(q, self.xt, self.yt)
            o.curves = log.curves()
            o.train_accuracy = o.curves["train_accuracy"][-1]

        w = self.ctx.backend.to_numpy(q["w"])
        found = tuple(sorted(int(i) for i in np.argsort(-np.abs(w), kind="stable")[: self.prob.k_sparse]))
        traces = {f"epoch_{i + 1}": t for i, t in enumerate(log.traces)}
        return Outcome(epochs=epochs, secret_found=found, traces=traces, evaluate=evaluate)


def train_linear(sgd: Hyper, ctx: Context) -> Outcome:
    """Train the linear model with sgd's hyper-parameters (hidden and the variant do not apply)."""
    be, run = ctx.backend, LinearRun(sgd, ctx)
    n = run.prob.n_bits
    rng = method_rng(be, run.prob.seed)  # the batch order, seeded as the MLP's
    p, x, y = run.init(), run.x, run.y
    if ctx.traces(Scope.INIT_SAMPLE0):
        run.single_step(p, 0)
    all_steps = ctx.traces(Scope.ALL_STEPS)
    log, m, bs, epochs = EpochLog(), x.shape[0], sgd.batch_size, sgd.max_epochs
    for epoch in range(sgd.max_epochs):
        perm = be.index(rng.permutation(m))
        xs, ys = x[perm], y[perm]
        epoch_trace = Trace() if all_steps else NULL_TRACE
        if all_steps and epoch == 0:
            with ctx.recording(loaded=p, trace=epoch_trace) as r:
                r.trace.write("w", n)
                r.trace.write("b", 1)
        for s in range(0, m, bs):
            xb, yb = xs[s : s + bs], ys[s : s + bs]
            if not all_steps:
                linear_step(p, xb, yb, sgd.lr, run.keep, NULL_TRACE)
                continue
            with ctx.recording(held=p, loaded={"x": xb, "y": yb}, trace=epoch_trace) as r:
                r.trace.write("x", xb)
                r.trace.write("y", yb)
                linear_step({k: r[k] for k in p}, r["x"], r["y"], sgd.lr, run.keep, r.trace)
            epoch_trace.end_step()  # one segment per step (sweep.trace.trace)
        if all_steps:
            ctx.trace.extend(epoch_trace)
            log.traces.append(epoch_trace)
        log.record(p, run.measure)
        if run.accuracy(p, run.xt, run.yt) >= sgd.target_accuracy:
            epochs = epoch + 1
            break
    run.trace_published(p)
    return run.outcome(p, epochs, log)


def train_linear_runs(sgds: list[Hyper], ctxs: list[Context]) -> list["Outcome | BaseException"]:
    """train_linear for R runs at once (methods/batched.py): w (R, n), b (R, 1), each run with its own data,
    lr, wd, batch order and early stopping (a run that stops leaves the working arrays)."""
    first, be = sgds[0], ctxs[0].backend
    xp, R = be.xp, len(ctxs)
    runs = [LinearRun(s, c) for s, c in zip(sgds, ctxs)]
    started = batched.each(
        list(range(R)), lambda r: runs[r].single_step(runs[r].init(), 0) if ctxs[r].traces(Scope.INIT_SAMPLE0) else None
    )
    p = {"w": be.asarray(np.zeros((R, runs[0].prob.n_bits))), "b": be.asarray(np.zeros((R, 1)))}
    x, y = (batched.stack(be, [getattr(c.data, a) for c in ctxs]) for a in ("x_train", "y_train"))
    xt, yt = (batched.stack(be, [getattr(c.data, a) for c in ctxs]) for a in ("x_test", "y_test"))
    lr, keep = np.array([s.lr for s in sgds]), np.array([r.keep for r in runs])
    logs = [EpochLog() for _ in runs]
    decide = runs[0].prob.decide

    def predict(q: Params, xa):
        return (q["w"][:, None, :] @ batched.mT(xa))[:, 0] + q["b"]  # w x^T: per run, the solo x @ w

    def stepper(ids: np.ndarray):
        """The step of runs ids: host float64 lr / B and keep, as the solo step's Python floats."""
        m, bs = x.shape[1], first.batch_size
        rates = {B: be.asarray(lr[ids] / B)[:, None] for B in {min(bs, m - s) for s in range(0, m, bs)}}
        shrink = be.asarray(keep[ids])[:, None]

        def step(q: Params, xb, yb) -> None:
            out = predict(q, xb)
            out -= yb
            out *= rates[xb.shape[1]]
            q["w"] *= shrink
            q["w"] -= (out[:, None, :] @ xb)[:, 0]
            q["b"] -= out.sum(1, keepdims=True)

        return step

    def done(q: Params, xt, yt) -> np.ndarray:
        acc = xp.mean(xp.astype(decide(xp, predict(q, xt)) == yt, xt.dtype), axis=1)
        return be.to_numpy(acc) >= first.target_accuracy

    epochs = batched.train_runs(
        be,
        first.batch_size,
        first.max_epochs,
        stepper,
        done,
        logs,
        per_row(lambda r: runs[r].measure),
        p,
        (x, y, xt, yt),
        [method_rng(be, c.problem.seed) for c in ctxs],
        np.array([s is None for s in started]),
        batched.cache_chunk(be, first.batch_size * runs[0].prob.n_bits),
    )

    def finish(r: int) -> Outcome:
        if started[r] is not None:
            raise started[r]
        q = batched.run_slice(p, r)
        runs[r].trace_published(q)
        return runs[r].outcome(q, int(epochs[r]), logs[r])

    return batched.each(list(range(R)), finish)
