"""R runs of one SGD-like method solved together: every array gains a leading runs axis (issue 25).

A small net cannot fill a core (or a GPU) by itself; R of them stacked make each matmul a batched one
(``np.matmul`` / ``torch.bmm`` on (R, ...) arrays) and pay Python's per-call overhead once for R runs. Each
run keeps its own data, initialisation, learning rate, weight decay, early stopping and epoch count: a run
that reached its target, or whose step has no active margin, is frozen by a mask (its update scaled by zero,
its decay by one), not stepped. Per run, the arithmetic is the solo step's (methods/sgd.py and the standard
variant's): numpy's stacked matmul calls the same gemm per run, so under float64 a batched numpy run equals
its solo run bit for bit; torch's batched kernels may round differently (a few ulps, far below 1e-9).

Only the training loop is batched. What is per run by nature runs the solo code on the run's slice of the
weights: the traced single steps, the per-epoch curves (EpochLog) and the evaluation after the clock.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from sweep.backend import Backend
from sweep.methods.base import Context
from sweep.trace.scope import Scope

Params = dict[str, Any]  # W1 (R, H, n), b1 (R, H), W2 (R, 1, H), b2 (R, 1): a run's slice is its solo shape

# Variants whose step the batched loop computes exactly: standard and fused do the same arithmetic (fused only
# reorders independent updates); perlayer takes dh from the updated W2. The tiled ones split the matmuls.
VARIANTS = ("standard", "fused", "perlayer")


def batchable(ctx: Context) -> bool:
    """Can this job's solve join a batch? Not when every step is traced (each run's step events would have to
    be recorded one by one), not under torch.compile or autocast (the compiled/cast step is the solo one)."""
    be = ctx.backend
    return (
        not ctx.traces(Scope.ALL_STEPS)
        and not be.compile
        and be.autocast == "none"
        and (ctx.variant is None or ctx.variant.name in VARIANTS)
    )


def each(items: list, fn: Callable[[Any], Any]) -> list:
    """fn(item) per run; a run whose call raises gets its exception, the others go on."""
    out = []
    for it in items:
        try:
            out.append(fn(it))
        except Exception as e:  # noqa: BLE001 - the run's own failure is its result
            out.append(e)
    return out


def run_slice(p: Params, r: int) -> Params:
    """Run r's weights, as views with the solo shapes (so the solo code evaluates and traces them)."""
    return {k: v[r] for k, v in p.items()}


def stack(be: Backend, arrays: list[np.ndarray]):
    return be.asarray(np.stack(arrays))


def mT(a):
    """The last two axes swapped (a view), on numpy and torch alike."""
    return a.mT if hasattr(a, "mT") else a.swapaxes(-1, -2)


def gather_rows(be: Backend, a, perm: np.ndarray):
    """a[r][perm[r]] for every run: each run's epoch order of its own rows."""
    return a[be.index(np.arange(perm.shape[0])[:, None]), be.index(perm)]


class RunsUpdate:
    """Per-run optimiser factors on the device, gated each step by ``go`` (the runs that step). A frozen run
    gets scale 0 and keep 1: its parameters are unchanged exactly (p * 1 - 0 = p)."""

    def __init__(self, be: Backend, lr: np.ndarray, wd: np.ndarray, sign: bool, dead_zone: float = 0.0) -> None:
        xp = be.xp
        self.be, self.xp, self.sign, self.noise = be, xp, sign, dead_zone
        # host float64, as the solo update's Python floats, then cast once to the backend's dtype
        self.lr, self.wd = be.asarray(lr), be.asarray(wd)
        self.keep_all = be.asarray(1.0 - lr * wd)
        self.scale = np.ones_like(lr) if sign else lr  # what the gradient arrives times (Update.scale)
        self._dout: dict[int, Any] = {}

    def dout_factor(self, B: int):
        """-scale / B per run, (R, 1): the solo step's ``y * (-scale / B)`` factor, computed in float64."""
        if B not in self._dout:
            self._dout[B] = self.be.asarray(-self.scale / B)[:, None]
        return self._dout[B]

    def gate(self, go) -> None:
        xp = self.xp
        self.step_lr = xp.where(go, self.lr, 0.0)
        self.step_keep = xp.where(go, self.keep_all, 1.0)

    def __call__(self, p, g, decay: bool) -> None:
        shape = (-1,) + (1,) * (p.ndim - 1)
        if self.sign:
            xp = self.xp
            if decay:
                g = g + self.wd.reshape(shape) * p
            p -= self.step_lr.reshape(shape) * xp.sign(xp.where(xp.abs(g) > self.noise, g, 0.0))
            return
        if decay:
            p *= self.step_keep.reshape(shape)
        p -= g


def forward(xp, p: Params, x):
    """The MLP's forward for R runs: x (R, B, n) -> h_pre, h (R, B, H), out (R, B)."""
    h_pre = x @ mT(p["W1"])
    h_pre += p["b1"][:, None, :]
    h = xp.maximum(h_pre, 0.0)
    out = (p["W2"] @ mT(h))[:, 0] + p["b2"]  # W2 h^T: torch's batched kernel rounds as its solo h @ w here
    return h_pre, h, out


def mlp_step(xp, p: Params, x, y, upd: RunsUpdate, go, perlayer: bool) -> None:
    """One hinge-loss SGD step of every run in ``go`` (R,) on its batch x (R, B, n), y (R, B)."""
    h_pre, h, out = forward(xp, p, x)
    active = (out * y) < 1.0
    go = go & active.any(1)  # no active margin: the solo step changes nothing, so the run is frozen
    if not bool(go.any()):
        return
    upd.gate(go)
    dout = xp.where(active & go[:, None], y * upd.dout_factor(x.shape[1]), 0.0)
    dW2 = dout[:, None, :] @ h
    db2 = dout.sum(1, keepdims=True)
    if perlayer:  # layer 2 first, and dh from the updated W2
        upd(p["W2"], dW2, True)
        upd(p["b2"], db2, False)
    dh = dout[:, :, None] * p["W2"]
    dh *= h_pre > 0
    upd(p["W1"], mT(dh) @ x, True)
    upd(p["b1"], dh.sum(1), False)
    if not perlayer:
        upd(p["W2"], dW2, True)
        upd(p["b2"], db2, False)


def reached(be: Backend, p: Params, xt, yt, target: float, chunk: int = 64) -> np.ndarray:
    """Each run's early-stopping test (SGD.reached): test accuracy >= target; for target 1.0 the test stops at
    the first chunk where every run has an error."""
    xp = be.xp
    if target < 1.0:
        pred = xp.where(forward(xp, p, xt)[2] >= 0, 1.0, -1.0)
        return be.to_numpy(xp.mean(xp.astype(pred == yt, xt.dtype), axis=1)) >= target
    ok = np.ones(xt.shape[0], dtype=bool)
    for s in range(0, xt.shape[1], chunk):
        out = forward(xp, p, xt[:, s : s + chunk])[2]
        ok &= be.to_numpy(((out >= 0) == (yt[:, s : s + chunk] > 0)).all(1))
        if not ok.any():
            break
    return ok


def train_runs(
    be: Backend,
    batch_size: int,
    max_epochs: int,
    step: Callable[[Any, Any, Any], None],
    done: Callable[[], np.ndarray],
    x,
    y,
    rngs: list[np.random.RandomState],
    record: Callable[[int], None],
    running: np.ndarray,
) -> np.ndarray:
    """SGD's epoch loop for R runs; returns each run's epochs. ``running`` (R,) host bools: the runs that
    train. Each epoch every running run draws its own order from its own rng (a frozen run draws nothing, as
    its solo run has stopped), ``step(xb, yb, go)`` steps the batch, ``record(r)`` logs run r's epoch and
    ``done()`` is each run's stopping test."""
    running = running.copy()
    epochs = np.zeros(running.size, dtype=int)
    m = x.shape[1]
    for epoch in range(max_epochs):
        live = np.flatnonzero(running)
        if live.size == 0:
            break
        perm = np.stack([rngs[r].permutation(m) if running[r] else np.arange(m) for r in range(running.size)])
        xs, ys = gather_rows(be, x, perm), gather_rows(be, y, perm)
        go = be.index(running) > 0
        for s in range(0, m, batch_size):
            step(xs[:, s : s + batch_size], ys[:, s : s + batch_size], go)
        for r in live:
            record(int(r))
        epochs[live] = epoch + 1
        running &= ~done()
    return epochs
