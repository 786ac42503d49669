"""method=forward_forward: Hinton's Forward-Forward (seed 002), no backward pass.

The label is appended to the input as one more +-1 bit. Each step runs two forward passes, a positive one
(x, y) and a negative one (x, -y); every layer has its own goodness g = mean(relu(z)^2) and its own local
objective softplus(threshold - g_pos) + softplus(g_neg - threshold), whose gradient needs only that layer's
input and activity, so each layer is updated as soon as its forward is done. The next layer gets the
length-normalised activity (the direction only, as Hinton does), never a gradient. Prediction: the label whose
input makes the summed goodness larger. It solves sparse_and at n=20 and parity at small n (6-8 bits); like
seed 002 found, parity at n=20 is not solved within 100 epochs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from sweep.config.fields import METHOD_RULES, Rule, nonneg_finite, positive_int
from sweep.config.footprint import Term, mlp, mlp_epoch, mlp_epochs
from sweep.methods.base import Context, MethodBase, Outcome
from sweep.methods.counter_rng import method_rng
from sweep.methods.epoch_log import EpochLog, Measure, hidden_progress
from sweep.trace.scope import Scope
from sweep.trace.source import Source
from sweep.trace.trace import NULL_TRACE, Trace
from sweep.variants.base import relu

Layers = list[dict[str, Any]]  # [{"W": (H, in), "b": (H,)}, ...]


@dataclass
class ForwardForward(MethodBase):
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity", "sparse_and")  # +-1 labels to embed
    trace_source: ClassVar[str] = Source.HAND.value  # tracker.source=method: its hand trace is the protocol
    field_rules: ClassVar[tuple[Rule, ...]] = (
        *METHOD_RULES,
        Rule("method.layers", "an integer >= 1", positive_int),
        Rule("method.threshold", "a finite number >= 0 (a goodness: a mean square activation)", nonneg_finite),
    )

    name: str = "forward_forward"
    hidden: int = 64
    layers: int = 2
    lr: float = 0.3
    threshold: float = 1.0  # goodness (mean squared activation) that separates positive from negative
    batch_size: int = 32
    max_epochs: int = 200
    target_accuracy: float = 1.0

    footprint: ClassVar[Callable[[Any], list[Term]]] = staticmethod(mlp)  # sweep.config.footprint
    least_work: ClassVar[Callable[[Any], list[Term]]] = staticmethod(mlp_epoch)
    most_work: ClassVar[Callable[[Any], list[Term]]] = staticmethod(mlp_epochs)

    def init_layers(self, n_in: int, seed: int, be: Any = None) -> tuple[list[dict[str, Any]], Any]:
        rng = method_rng(be, seed)
        sizes = [n_in] + [self.hidden] * self.layers
        return [{"W": rng.randn(o, i) * np.sqrt(2.0 / i), "b": np.zeros(o)} for i, o in zip(sizes[:-1], sizes[1:])], rng

    @staticmethod
    def embed(xp, x, label):
        return xp.concat([x, label[:, None]], axis=1)

    @staticmethod
    def normalise(xp, a):
        return a / (xp.sqrt(xp.mean(a * a, axis=1, keepdims=True)) + 1e-8)

    def goodness(self, xp, net: Layers, inp):
        """Summed goodness over layers for each row of inp (the prediction's score)."""
        total = 0.0
        for layer in net:
            a = relu(xp, inp @ layer["W"].T + layer["b"])
            total = total + xp.mean(a * a, axis=1)
            inp = self.normalise(xp, a)
        return total

    def loss(self, xp, net: Layers, x, y) -> float:
        """The training objective: per sample, the layers' softplus(threshold - g_pos) + softplus(g_neg -
        threshold) summed, averaged over the samples (softplus(z) = logaddexp(0, z))."""
        total, pos, neg = 0.0, self.embed(xp, x, y), self.embed(xp, x, -y)
        for layer in net:
            a_pos = relu(xp, pos @ layer["W"].T + layer["b"])
            a_neg = relu(xp, neg @ layer["W"].T + layer["b"])
            zero = xp.zeros_like(y)
            total = total + xp.mean(
                xp.logaddexp(zero, self.threshold - xp.mean(a_pos * a_pos, axis=1))
                + xp.logaddexp(zero, xp.mean(a_neg * a_neg, axis=1) - self.threshold)
            )
            pos, neg = self.normalise(xp, a_pos), self.normalise(xp, a_neg)
        return float(total)

    def measure(self, xp, x, y, xt, yt, p0: dict[str, Any]) -> Measure:
        """Per-epoch diagnostics (after the clock): train/test accuracy and loss, hidden progress per layer."""

        def run(p: dict[str, Any]) -> dict[str, float]:
            net = self.unflatten(p)
            return {
                "train_accuracy": self.accuracy(xp, net, x, y),
                "test_accuracy": self.accuracy(xp, net, xt, yt),
                "train_loss": self.loss(xp, net, x, y),
                "test_loss": self.loss(xp, net, xt, yt),
                **hidden_progress(xp, p, p0, tuple(k for k in p0 if k.startswith("W"))),
            }

        return run

    @staticmethod
    def flatten(net: Layers) -> dict[str, Any]:
        """{W0, b0, W1, b1, ...}: the layers under the names the trace gives them."""
        return {f"{k}{i}": v for i, layer in enumerate(net) for k, v in layer.items()}

    @staticmethod
    def unflatten(p: dict[str, Any]) -> Layers:
        return [{"W": p[f"W{i}"], "b": p[f"b{i}"]} for i in range(len(p) // 2)]

    def accuracy(self, xp, net: Layers, x, y) -> float:
        ones = xp.ones(x.shape[0], dtype=x.dtype, device=x.device)  # on x's device (cuda)
        pred = xp.where(
            self.goodness(xp, net, self.embed(xp, x, ones)) >= self.goodness(xp, net, self.embed(xp, x, -ones)),
            1.0,
            -1.0,
        )
        return float(xp.mean(xp.astype(pred == y, x.dtype)))

    @staticmethod
    def init_trace(trace: Trace, net: Layers) -> None:
        """The writes that put every layer's parameters in memory, before the first step reads them."""
        for li, layer in enumerate(net):
            trace.write(f"W{li}", layer["W"])
            trace.write(f"b{li}", layer["b"])

    def step(self, xp, net: Layers, x, y, trace: Trace) -> None:
        """Both passes through every layer, each layer updated from its local objective right away.

        Traced as it runs: per layer and pass, the layer's input, W and b are read for the forward; the
        activity, goodness and the local gradient dz are written and read back. Then the layer's two local
        updates, one per phase (positive, negative), each read that phase's dz and input and the layer's W and
        b and write them back: W is read four times a step (two forwards, two updates; seed 002's count,
        against backprop's two for W1). Both updates come after both forwards, so the math is that of one
        update by the summed gradient. The normalised activities become the next layer's inputs."""
        R, W, C = trace.read, trace.write, trace.compute
        B, n = x.shape
        R("x", x)
        R("y", y)
        pos, neg = self.embed(xp, x, y), self.embed(xp, x, -y)
        W("pos0", pos)
        W("neg0", neg)
        C("mul", B)  # -y
        thr = self.threshold
        for li, layer in enumerate(net):
            Wl, bl = layer["W"], layer["b"]
            H, n_in = Wl.shape
            acts = []
            for sign, inp, tag in ((1.0, pos, "pos"), (-1.0, neg, "neg")):  # the two forward passes
                R(f"{tag}{li}", inp)
                R(f"W{li}", Wl)
                R(f"b{li}", bl)
                a = relu(xp, inp @ Wl.T + bl)
                C("fma", B * n_in * H)
                C("add", B * H)
                C("max", B * H)
                W(f"a_{tag}{li}", a)
                R(f"a_{tag}{li}", a)
                g = xp.mean(a * a, axis=1)
                C("fma", B * H)
                C("mul", B)
                W(f"g_{tag}{li}", g)
                R(f"g_{tag}{li}", g)
                # d/dg of softplus(thr - g) is -sigmoid(thr - g); of softplus(g - thr) it is sigmoid(g - thr);
                # the learning rate is folded in here (B floats), so an update is one subtract per weight
                dg = (-sign * self.lr / B) / (1.0 + xp.exp(sign * (g - thr)))
                C("add", 2 * B)
                C("mul", B)
                C("exp", B)
                C("div", B)
                R(f"a_{tag}{li}", a)
                dz = dg[:, None] * (2.0 / H) * a  # lr * dloss/dz = dg * 2a/H (relu: 0 where a=0)
                C("mul", B + B * H)
                W(f"dz_{tag}{li}", dz)
                acts.append((tag, inp, a, dz))
            for tag, inp, _, dz in acts:  # the two local updates, one per phase
                R(f"dz_{tag}{li}", dz)
                R(f"{tag}{li}", inp)
                R(f"W{li}", Wl)
                Wl -= dz.T @ inp
                C("fma", B * n_in * H)
                C("add", n_in * H)
                W(f"W{li}", Wl)
                R(f"dz_{tag}{li}", dz)
                R(f"b{li}", bl)
                bl -= xp.sum(dz, axis=0)
                C("add", B * H + H)
                W(f"b{li}", bl)
            pa, na = acts[0][2], acts[1][2]
            if li + 1 < len(net):  # no gradient flows back: the next layer sees the direction only
                R(f"a_pos{li}", pa)
                R(f"a_neg{li}", na)
                pos, neg = self.normalise(xp, pa), self.normalise(xp, na)
                C("fma", 2 * B * H)
                C("add", 2 * B)
                C("sqrt", 2 * B)
                C("div", 2 * B * H)
                W(f"pos{li + 1}", pos)
                W(f"neg{li + 1}", neg)

    def traced_step(self, ctx: Context, net: Layers, xb, yb) -> None:
        """One training step recorded into the run's trace as a segment of its own (sweep.trace.trace)."""
        with ctx.recording(held=self.flatten(net), loaded={"x": xb, "y": yb}) as r:
            r.trace.write("x", xb)
            r.trace.write("y", yb)
            step = self.step if r.tracer is not None else ctx.backend.compiled(self.step)  # a tracer sees eager ops
            step(ctx.backend.xp, self.unflatten({k: r[k] for k in self.flatten(net)}), r["x"], r["y"], r.trace)
        ctx.trace.end_step()

    def solve(self, ctx: Context) -> Outcome:
        be, xp, d, prob = ctx.backend, ctx.backend.xp, ctx.data, ctx.problem
        net_np, rng = self.init_layers(prob.n_bits + 1, prob.seed, be)
        net = [{k: be.asarray(v) for k, v in layer.items()} for layer in net_np]
        x, y, xt, yt = (be.asarray(a) for a in (d.x_train, d.y_train, d.x_test, d.y_test))
        traced_all = ctx.traces(Scope.ALL_STEPS)
        if ctx.trace.enabled and not traced_all:
            # published / init_sample0: one traced single-sample step on a copy of the initial net
            copy = self.flatten([{k: v * 1.0 for k, v in layer.items()} for layer in net])
            with ctx.recording(loaded={**copy, "x": x[:1], "y": y[:1]}) as r:
                self.init_trace(r.trace, self.unflatten(copy))
                r.trace.write("x", x[:1])
                r.trace.write("y", y[:1])
                self.step(xp, self.unflatten({k: r[k] for k in copy}), r["x"], r["y"], r.trace)
        elif traced_all:
            with ctx.recording(loaded=self.flatten(net)) as r:
                self.init_trace(r.trace, net)
        step = be.compiled(self.step)
        n, epochs = x.shape[0], 0
        test_acc = 0.0
        log = EpochLog()
        measure = self.measure(xp, x, y, xt, yt, {k: v * 1.0 for k, v in self.flatten(net).items()})
        for epoch in range(self.max_epochs):
            perm = be.index(rng.permutation(n))
            xs, ys = x[perm], y[perm]
            for s in range(0, n, self.batch_size):
                xb, yb = xs[s : s + self.batch_size], ys[s : s + self.batch_size]
                if traced_all:
                    self.traced_step(ctx, net, xb, yb)
                else:
                    step(xp, net, xb, yb, NULL_TRACE)
            epochs = epoch + 1
            log.record(self.flatten(net), measure)
            test_acc = self.accuracy(xp, net, xt, yt)
            if test_acc >= self.target_accuracy:
                break

        def evaluate(o: Outcome) -> None:
            o.train_accuracy = self.accuracy(xp, net, x, y)
            o.curves = log.curves()

        # the test accuracy is the stopping check's, already computed: only the train accuracy is evaluated
        return Outcome(accuracy=test_acc, epochs=epochs, evaluate=evaluate)
