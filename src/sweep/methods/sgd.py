"""method=sgd: 2-layer ReLU MLP, hinge loss, mini-batch SGD with weight decay (seeds 000-002); on a problem
with integer labels (problem.loss == "squared", sparse_sum) a linear model on squared error (linear_sgd.py).

The step itself lives in the variant (standard, fused, perlayer, tiled), which orders the arithmetic and
emits the trace; this file owns initialisation, the epoch loop, early stopping and what is traced.
sign_sgd and curriculum reuse this class (subclasses), so the loop exists once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, ClassVar

import numpy as np
from hydra.utils import get_class

from sweep.backend import Backend
from sweep.config.fields import METHOD_RULES, Rule
from sweep.config.footprint import Term, mlp, mlp_epoch, mlp_epochs
from sweep.errors import ConfigError
from sweep.methods import batched, counter_rng
from sweep.methods.base import Context, MethodBase, Outcome
from sweep.methods.counter_rng import method_rng
from sweep.methods.epoch_log import EpochLog, Measure, hidden_progress, per_row
from sweep.methods.linear_sgd import train_linear, train_linear_runs
from sweep.methods.step_templates import StepTemplates
from sweep.trace.scope import Scope
from sweep.trace.source import Source
from sweep.trace.trace import NULL_TRACE, Trace
from sweep.variants.base import Params, Update, relu

WEIGHTS = ("W1", "W2")  # the weight matrices whose hidden progress is logged
# Rows per forward pass when a whole data set is evaluated on numpy (SGD.predict_rows): (128, H) temporaries stay
# in the core's cache and below the size at which OpenBLAS splits a matmul over its threads.
EVAL_ROWS = 128
EVAL_BYTES = 256 << 20  # torch's curves (measure_rows): a group of runs' (runs, samples, hidden) activations


def init_params(n: int, hidden: int, seed: int, be: Backend | None = None) -> tuple[dict[str, Any], Any]:
    """He-style init drawn like the group's harness: RandomState(seed + 1) (docs/traces.md), or on the device
    under device.rng=counter (method_rng); also returns the generator, which then draws the batch orders."""
    rng = method_rng(be, seed)
    W1 = rng.randn(hidden, n) * np.sqrt(2.0 / n)
    W2 = rng.randn(1, hidden) * np.sqrt(2.0 / hidden)
    return {"W1": W1, "b1": np.zeros(hidden), "W2": W2, "b2": np.zeros(1)}, rng


class SGDUpdate:
    """p <- p - lr (grad + wd p) = keep p - lr grad: the decay is one in-place shrink, and lr grad arrives
    ready-made (scale = lr, folded into dout by the step)."""

    def __init__(self, lr: float, wd: float) -> None:
        self.scale, self.keep = lr, 1.0 - lr * wd

    def __call__(self, p: Any, g: Any, decay: bool) -> None:
        if decay and self.keep != 1.0:
            p *= self.keep
        p -= g

    def count(self, trace: Trace, size: int, decay: bool) -> None:
        if decay and self.keep != 1.0:
            trace.compute("mul", size)
        trace.compute("add", size)


@dataclass
class SGD(MethodBase):
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity", "sparse_and", "sparse_sum")
    # the config keys whose values may differ between the runs of one batch (hydra.launcher.batch)
    vectorised: ClassVar[tuple[str, ...]] = ("problem.seed", "method.lr", "method.wd")
    trace_source: ClassVar[str] = Source.HAND.value  # tracker.source=method: its hand trace is the protocol
    models: ClassVar[dict[str, Callable[["SGD", Context], Outcome]]]  # problem.loss -> model (end of file)
    batch_models: ClassVar[dict[str, Callable]]  # the same, for R runs at once (solve_batch)
    field_rules: ClassVar[tuple[Rule, ...]] = METHOD_RULES
    takes_variant: ClassVar[bool] = True  # its step is the variant's (sweep.variants): ordered, fused, tiled

    name: str = "sgd"
    hidden: int = 200
    lr: float = 0.1
    wd: float = 0.01
    batch_size: int = 32
    max_epochs: int = 200
    target_accuracy: float = 1.0

    footprint: ClassVar[Callable[[Any], list[Term]]] = staticmethod(mlp)  # sweep.config.footprint
    least_work: ClassVar[Callable[[Any], list[Term]]] = staticmethod(mlp_epoch)
    most_work: ClassVar[Callable[[Any], list[Term]]] = staticmethod(mlp_epochs)

    @classmethod
    def check_config(cls, cfg) -> None:
        """The variants order the MLP's step: a problem whose model is not the MLP takes variant=standard."""

        problem = get_class(cfg.problem._target_)
        variant = cfg.select("variant.name", "standard")
        if cls.models[problem.loss] is not SGD.solve_mlp and variant != "standard":
            raise ConfigError(
                f"variant={variant} orders the MLP's step; method={cfg.method.name} on "
                f"problem={problem.name} trains a linear model on {problem.loss} error: "
                f"use variant=standard"
            )

    def make_update(self, xp) -> Update:
        return SGDUpdate(self.lr, self.wd)

    def runs_update(self, be, lr: np.ndarray, wd: np.ndarray) -> batched.RunsUpdate:
        """make_update for R runs with their own lr and wd (R,) (methods/batched.py)."""
        return batched.RunsUpdate(be, lr, wd, sign=False)

    # -- pieces shared with sign_sgd and curriculum --------------------------------------------------
    def predict(self, xp, p: Params, x):
        h_pre = x @ p["W1"].T
        h_pre += p["b1"]  # in place, as in the step's forward
        return relu(xp, h_pre) @ p["W2"][0] + p["b2"]

    def predict_rows(self, xp, p: Params, x):
        """predict over a whole data set, on numpy EVAL_ROWS rows at a time. Equal to predict bit for bit (each
        row's dot products are the same), and at 1000 x 200 ~18x less CPU on a busy 2-core machine: whole, its
        (1000, 200) temporaries were mapped fresh from the OS each call and its matmul split over two BLAS
        threads that spin waiting for each other; the per-epoch curves, evaluated this way, were ~3/4 of a
        worker's CPU in sweeps=sign_vs_sgd. torch keeps one pass (its chunked passes measured slower)."""
        n = x.shape[0]
        if n <= EVAL_ROWS or not isinstance(x, np.ndarray):
            return self.predict(xp, p, x)
        return np.concatenate([self.predict(xp, p, x[s : s + EVAL_ROWS]) for s in range(0, n, EVAL_ROWS)])

    def accuracy(self, xp, p: Params, x, y) -> float:
        out = self.predict_rows(xp, p, x)
        pred = xp.where(out >= 0, 1.0, -1.0)
        return float(xp.mean(xp.astype(pred == y, x.dtype)))

    def reached(self, xp, p: Params, x, y, chunk: int = 64) -> bool:
        """Test accuracy >= target? For target 1.0 stop at the first chunk with an error: before
        convergence that is the first chunk, so the per-epoch check costs a fraction of a full evaluation."""
        if self.target_accuracy < 1.0:
            return self.accuracy(xp, p, x, y) >= self.target_accuracy
        for s in range(0, x.shape[0], chunk):
            out = self.predict(xp, p, x[s : s + chunk])
            if not bool(((out >= 0) == (y[s : s + chunk] > 0)).all()):
                return False
        return True

    def measure(self, xp, x, y, xt, yt, p0: Params) -> Measure:
        """The per-epoch diagnostics of one training set: train/test accuracy and loss (the hinge max(0, 1 - y out)
        without weight decay), and hidden progress (seed 002: ||w_t - w_0||_1) of each weight matrix and of all."""

        def scores(p: Params, split: str, xs, ys) -> dict[str, float]:
            out = self.predict_rows(xp, p, xs)  # one forward pass for both figures
            return {k: float(v) for k, v in hinge_scores(xp, out, ys, split).items()}

        def run(p: Params) -> dict[str, float]:
            return {**scores(p, "train", x, y), **scores(p, "test", xt, yt), **hidden_progress(xp, p, p0, WEIGHTS)}

        return run

    def measure_rows(self, be: Backend, data: tuple, p0: Params, q: Params, ids: np.ndarray) -> dict[str, Any]:
        """measure's figures for the runs ``ids`` of R solved together (their weights q, a row each; data and p0
        for all R). numpy evaluates each run with its solo code; torch evaluates groups of runs in one pass (on a
        GPU, thousands of runs' curves one by one were ~40 ms a run of small kernels, after the clock)."""
        xp = be.xp
        if be.name == "numpy":
            return per_row(lambda r: self.measure(xp, *(a[r] for a in data), {k: v[r] for k, v in p0.items()}))(q, ids)
        m, hidden = data[0].shape[1], q["W1"].shape[1]
        group = max(1, EVAL_BYTES // (m * hidden * data[0].element_size()))
        parts: dict[str, list] = {}
        for lo in range(0, len(ids), group):
            sel, rows = be.index(ids[lo : lo + group]), slice(lo, lo + group)
            w = {k: v[rows] for k, v in q.items()}
            for split, (xs, ys) in (("train", data[:2]), ("test", data[2:])):
                for k, v in hinge_scores(xp, batched.forward(xp, w, xs[sel])[2], ys[sel], split, axis=1).items():
                    parts.setdefault(k, []).append(v)
            for k in WEIGHTS:
                d = xp.sum(xp.abs(w[k] - p0[k][sel]).reshape(w[k].shape[0], -1), axis=1)
                parts.setdefault(f"hidden_progress_{k}", []).append(d)
        out = {k: be.to_numpy(xp.concat(v)).astype(np.float64) for k, v in parts.items()}
        out["hidden_progress"] = sum(out[f"hidden_progress_{k}"] for k in WEIGHTS)  # in float64, as the solo sum
        return out

    def train_epochs(
        self,
        ctx: Context,
        p: Params,
        x,
        y,
        xt,
        yt,
        rng: np.random.RandomState,
        n_epochs: int,
        log: EpochLog,
        measure: Measure,
        first: bool = True,
    ) -> tuple[int, bool]:
        """Run up to n_epochs; returns (epochs run, target reached). The log gets one entry per epoch."""
        xp, be = ctx.backend.xp, ctx.backend
        update = self.make_update(xp)
        step = ctx.backend.compiled(ctx.variant.step)
        all_steps = ctx.traces(Scope.ALL_STEPS)
        n, bs = x.shape[0], self.batch_size
        known = StepTemplates(ctx)
        for epoch in range(n_epochs):
            perm = be.index(rng.permutation(n))
            xs, ys = x[perm], y[perm]  # one gather per epoch: the batches below are views
            epoch_trace = Trace() if all_steps else NULL_TRACE
            if all_steps and epoch == 0 and first:
                with ctx.recording(loaded=p, trace=epoch_trace) as r:
                    ctx.variant.init_trace(r.trace, p)
            for s in range(0, n, bs):
                xb, yb = xs[s : s + bs], ys[s : s + bs]
                if all_steps:
                    known.step(step, xp, p, xb, yb, update, epoch_trace)
                    continue
                step(xp, p, xb, yb, update, NULL_TRACE)
            if all_steps:
                ctx.trace.extend(epoch_trace)
                log.traces.append(epoch_trace)
            log.record(p, measure)
            if self.reached(xp, p, xt, yt):
                return epoch + 1, True
        return n_epochs, False

    def trace_published_step(self, ctx: Context, p: Params, x_np: np.ndarray, y_np: np.ndarray) -> None:
        """Seed 001's protocol: one single-sample step on the first training sample with hinge margin < 1
        (after training), on a copy of the weights; sample 0 if every margin is >= 1."""
        be, xp = ctx.backend, ctx.backend.xp
        margins = be.to_numpy(self.predict_rows(xp, p, be.asarray(x_np))) * y_np
        below = np.flatnonzero(margins < 1.0)
        i = int(below[0]) if below.size else 0
        self.trace_single_step(ctx, p, x_np[i : i + 1], y_np[i : i + 1])

    def trace_single_step(self, ctx: Context, p: Params, x1: np.ndarray, y1: np.ndarray) -> None:
        be = ctx.backend
        q = {k: v * 1.0 for k, v in p.items()}  # the traced step must not change the trained weights
        with ctx.recording(loaded={**q, "x": be.asarray(x1), "y": be.asarray(y1)}) as r:
            ctx.variant.init_trace(r.trace, q)
            r.trace.write("x", x1.size)
            r.trace.write("y", y1.size)
            ctx.variant.step(be.xp, {k: r[k] for k in q}, r["x"], r["y"], self.make_update(be.xp), r.trace)

    def outcome(self, ctx: Context, p: Params, epochs: int, log: EpochLog, xt, yt) -> Outcome:
        """The trained net's outcome; its test accuracy, curves and train accuracy are evaluated after the
        clock (Outcome.evaluate)."""
        xp = ctx.backend.xp

        def evaluate(o: Outcome) -> None:
            o.accuracy = self.accuracy(xp, p, xt, yt)
            o.curves = log.curves()
            o.train_accuracy = o.curves["train_accuracy"][-1]

        traces = {f"epoch_{i + 1}": t for i, t in enumerate(log.traces)}
        return Outcome(epochs=epochs, traces=traces, evaluate=evaluate)

    def solve(self, ctx: Context) -> Outcome:
        """The model the problem's loss calls for (SGD.models), trained with this config."""
        return self.models[ctx.problem.loss](self, ctx)

    def solve_mlp(self, ctx: Context) -> Outcome:
        be, d = ctx.backend, ctx.data
        p_np, rng = init_params(ctx.problem.n_bits, self.hidden, ctx.problem.seed, be)
        self.trace_start(ctx, p_np, d.x_train[:1])
        p = {k: be.asarray(v) for k, v in p_np.items()}
        x, y = be.asarray(d.x_train), be.asarray(d.y_train)
        xt, yt = be.asarray(d.x_test), be.asarray(d.y_test)
        log = EpochLog()
        measure = self.measure(be.xp, x, y, xt, yt, {k: p[k] * 1.0 for k in WEIGHTS})
        epochs, _ = self.train_epochs(ctx, p, x, y, xt, yt, rng, self.max_epochs, log, measure)
        if ctx.traces(Scope.PUBLISHED):
            self.trace_published_step(ctx, p, d.x_train, d.y_train)
        return self.outcome(ctx, p, epochs, log, xt, yt)

    # -- R runs at once (solve_batch; the numerics in methods/batched.py) ----------------------------------
    @classmethod
    def batchable(cls, ctx: Context) -> bool:
        return batched.batchable(ctx)

    @classmethod
    def solve_batch(cls, methods: list["SGD"], ctxs: list[Context]) -> list["Outcome | BaseException"]:
        """methods[i] on ctxs[i] for every i in one vectorised solve; entry i is what methods[i].solve(ctxs[i])
        returns (under float64, the same accuracy, epochs and secret), or the exception run i alone raised."""
        first = methods[0]
        for m in methods:  # only the vectorised keys may differ (the batch's key guarantees it; checked here)
            if replace(m, lr=first.lr, wd=first.wd) != first:
                raise ValueError(f"solve_batch: {m} differs from {first} in more than lr and wd")
        if len(methods) == 1:  # a batch of one is the solo solve (the batched loop's bookkeeping costs it time)
            return batched.each([0], lambda _: methods[0].solve(ctxs[0]))
        with batched.gc_paused():
            return cls.solve_runs(methods, ctxs)

    @classmethod
    def solve_runs(cls, methods: list["SGD"], ctxs: list[Context]) -> list["Outcome | BaseException"]:
        return cls.batch_models[ctxs[0].problem.loss](methods, ctxs)

    @staticmethod
    def solve_mlp_runs(methods: list["SGD"], ctxs: list[Context]) -> list["Outcome | BaseException"]:
        first, be = methods[0], ctxs[0].backend
        runs = range(len(ctxs))
        if be.rng == "counter":  # every run's initial weights in one draw on the device
            rngs: list = [method_rng(be, c.problem.seed) for c in ctxs]
            n = ctxs[0].problem.n_bits
            p = {
                "W1": be.asarray(counter_rng.randn_of(be, rngs, first.hidden, n) * np.sqrt(2.0 / n)),
                "b1": be.asarray(np.zeros((len(ctxs), first.hidden))),
                "W2": be.asarray(counter_rng.randn_of(be, rngs, 1, first.hidden) * np.sqrt(2.0 / first.hidden)),
                "b2": be.asarray(np.zeros((len(ctxs), 1))),
            }
            start = lambda r: batched.run_slice(p, r)  # noqa: E731 - views, made only for a run traced from its start
        else:
            inits = [init_params(c.problem.n_bits, first.hidden, c.problem.seed) for c in ctxs]
            rngs = [i[1] for i in inits]
            p = {k: batched.stack(be, [i[0][k] for i in inits]) for k in inits[0][0]}
            start = lambda r: inits[r][0]  # noqa: E731
        started = batched.each(
            list(runs),
            lambda r: (
                methods[r].trace_start(ctxs[r], start(r), ctxs[r].data.x_train[:1])
                if ctxs[r].traces(Scope.INIT_SAMPLE0)
                else None
            ),
        )
        data = tuple(
            batched.stack(be, [getattr(c.data, a) for c in ctxs]) for a in ("x_train", "y_train", "x_test", "y_test")
        )
        logs = [EpochLog() for _ in runs]
        epochs = first.train_runs(methods, ctxs, p, data, rngs, logs, started)
        return batched.each(
            list(runs),
            lambda r: methods[r].run_outcome(ctxs[r], p, r, int(epochs[r]), logs[r], data, started[r]),
        )

    def trace_start(self, ctx: Context, p_np: dict[str, np.ndarray], x1: np.ndarray) -> None:
        """Seed 003's protocol (tracker.scope=init_sample0): one step on training sample 0 at the initial weights."""
        if ctx.traces(Scope.INIT_SAMPLE0):
            be = ctx.backend
            self.trace_single_step(ctx, {k: be.asarray(v) for k, v in p_np.items()}, x1, ctx.data.y_train[:1])

    def train_runs(
        self, methods: list["SGD"], ctxs: list[Context], p: Params, data: tuple, rngs: list, logs: list, started: list
    ) -> np.ndarray:
        """train_epochs for R runs (methods/batched.py): each run's epochs; the runs whose start failed (an
        exception in ``started``) or already solve the data (``started`` False) do not train."""
        be, xp = ctxs[0].backend, ctxs[0].backend.xp
        x, y, xt, yt = data
        # hidden progress is measured from the weights at the start of this training: one copy for all runs; a
        # run's measure is made when its curves are evaluated, after the clock (thousands of runs on a GPU)
        p0 = {k: p[k] * 1.0 for k in WEIGHTS}
        upd = self.runs_update(be, np.array([m.lr for m in methods]), np.array([m.wd for m in methods]))
        perlayer = ctxs[0].variant is not None and ctxs[0].variant.name == "perlayer"
        return batched.train_runs(
            be,
            self.batch_size,
            self.max_epochs,
            lambda ids: partial(batched.mlp_step, xp, upd=upd.subset(ids), perlayer=perlayer),
            lambda q, xt, yt: batched.reached(be, q, xt, yt, self.target_accuracy),
            logs,
            partial(self.measure_rows, be, data, p0),
            p,
            data,
            rngs,
            np.array([s is None for s in started]),
            batched.cache_chunk(be, self.batch_size * self.hidden),
        )

    def run_outcome(
        self, ctx: Context, p: Params, r: int, epochs: int, log: EpochLog, data: tuple, started: Any
    ) -> Outcome:
        """Run r's outcome from the batch's weights p, its published step traced as its solo run traces it."""
        if started is not None:
            raise started
        q = batched.run_slice(p, r)
        if ctx.traces(Scope.PUBLISHED):
            self.trace_published_step(ctx, q, ctx.data.x_train, ctx.data.y_train)
        return self.outcome(ctx, q, epochs, log, data[2][r], data[3][r])


def hinge_scores(xp, out, ys, split: str, axis: int | None = None) -> dict[str, Any]:
    """Accuracy and loss (the hinge max(0, 1 - y out) without weight decay) of outputs ``out`` against labels
    ``ys``: of one run, or of each run along ``axis``."""
    pred = xp.where(out >= 0, 1.0, -1.0)
    return {
        f"{split}_accuracy": xp.mean(xp.astype(pred == ys, out.dtype), axis=axis),
        f"{split}_loss": xp.mean(xp.maximum(1.0 - ys * out, 0.0), axis=axis),
    }


# problem.loss -> the model SGD trains: the hinge-loss MLP (with its variants), or a linear model on squared error
SGD.models = {"hinge": SGD.solve_mlp, "squared": train_linear}
SGD.batch_models = {"hinge": SGD.solve_mlp_runs, "squared": train_linear_runs}
