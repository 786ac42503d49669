"""R runs of one SGD-like method solved together: every array gains a leading runs axis.

A small net cannot fill a core (or a GPU) by itself; R of them stacked make each matmul a batched one
(``np.matmul`` / ``torch.bmm`` on (R, ...) arrays) and pay Python's per-call overhead once for R runs. Each
run keeps its own data, initialisation, learning rate, weight decay, early stopping and epoch count: a run
that reached its target leaves the working arrays (train_runs), and a run whose step has no active margin is
frozen for that step by a mask (its update scaled by zero, its decay by one), not stepped. Per run, the
arithmetic is the solo step's (methods/sgd.py and the standard variant's): numpy's stacked matmul calls the
same gemm per run, so under float64 a batched numpy run equals its solo run bit for bit; torch's batched
kernels may round differently (a few ulps, far below 1e-9).

Only the training loop is batched. What is per run by nature runs the solo code on the run's slice of the
weights: the traced single steps, the per-epoch curves (EpochLog) and the evaluation after the clock.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from sweep.backend import Backend
from sweep.methods import counter_rng
from sweep.methods.base import Context
from sweep.methods.epoch_log import EpochLog, RowsMeasure, Snapshot
from sweep.trace.scope import Scope
from sweep.variants.base import relu

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


@functools.cache
def keep_heap() -> None:
    """Keep freed memory in the process heap (glibc; once per process). A batched step's (R, B, H) temporaries
    are ~1 MB at R=16, hidden 200: glibc maps such blocks fresh or trims them back to the OS as they are freed,
    so every step paid page faults again (measured 3-4x slower steps at R=16 and 64). Both thresholds raised:
    up to 256 MiB of freed heap stays in the process for the next step."""
    libc = ctypes.util.find_library("c")
    if libc is None:
        return
    mallopt = getattr(ctypes.CDLL(libc), "mallopt", None)
    if mallopt is not None:
        mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD
        mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (glibc's maximum)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cycle collector paused while R runs are solved and made into results. Such a solve makes long-lived
    objects by the thousand (each run's log entries, one a run and epoch), so the collector's full passes came
    again and again, each walking every object the process holds: 73 us a run of a 2-epoch batch of 4,096
    (torch CPU). The solve makes no reference cycles to collect; reference counting frees what it drops."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


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
    """R runs' arrays as one (R, ...) array on the backend, stacked on the host straight into the backend's dtype:
    one pass (stacked in float64 and then cast, every byte was written twice, the first time into fresh pages;
    on a GPU the host's share of each run). The same values: both casts round to nearest. Arrays drawn on the
    device (device.rng=counter) are stacked there."""
    if not isinstance(arrays[0], np.ndarray) and be.name == "torch":
        return be.asarray(be._torch.stack(list(arrays)))
    return be.asarray(np.stack(arrays, dtype=np.dtype(be.dtype)))


def mT(a):
    """The last two axes swapped (a view), on numpy and torch alike."""
    return a.mT if hasattr(a, "mT") else a.swapaxes(-1, -2)


class RunsUpdate:
    """The optimiser of R runs with their own lr and wd (host (R,) float64 arrays, as the solo update's Python
    floats, cast once to the backend's dtype). ``gate(go)`` freezes the runs not stepping this step: scale 0
    and keep 1 leave their parameters exactly as they were (p * 1 - 0 = p)."""

    def __init__(self, be: Backend, lr: np.ndarray, wd: np.ndarray, sign: bool, dead_zone: float = 0.0) -> None:
        self.be, self.xp, self.sign, self.noise = be, be.xp, sign, dead_zone
        self.host = (lr, wd)
        self.lr, self.wd, self.keep = be.asarray(lr), be.asarray(wd), be.asarray(1.0 - lr * wd)
        self.scale = np.ones_like(lr) if sign else lr  # what the gradient arrives times (Update.scale)
        self._dout: dict[int, Any] = {}
        self.gate(None)

    def subset(self, ids: np.ndarray) -> "RunsUpdate":
        lr, wd = self.host
        return RunsUpdate(self.be, lr[ids], wd[ids], self.sign, self.noise)

    def dout_factor(self, B: int):
        """-scale / B per run, (R, 1): the solo step's ``y * (-scale / B)`` factor, computed in float64."""
        if B not in self._dout:
            self._dout[B] = self.be.asarray(-self.scale / B)[:, None]
        return self._dout[B]

    def gate(self, go) -> None:
        if go is None:  # every run steps
            self.step_lr, self.step_keep = self.lr, self.keep
            return
        self.step_lr = self.xp.where(go, self.lr, 0.0)
        self.step_keep = self.xp.where(go, self.keep, 1.0)

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
    h = relu(xp, h_pre)
    out = (p["W2"] @ mT(h))[:, 0] + p["b2"]  # W2 h^T: torch's batched kernel rounds as its solo h @ w here
    return h_pre, h, out


def mlp_step(xp, p: Params, x, y, upd: RunsUpdate, perlayer: bool) -> None:
    """One hinge-loss SGD step of every run on its batch x (R, B, n), y (R, B)."""
    h_pre, h, out = forward(xp, p, x)
    active = (out * y) < 1.0
    go = active.any(1)  # no active margin: the solo step changes nothing, so the run is frozen for this step
    if not bool(go.all()):
        if not bool(go.any()):
            return
        upd.gate(go)
    else:
        upd.gate(None)
    dout = xp.where(active, y * upd.dout_factor(x.shape[1]), 0.0)
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
    """Each run's early-stopping test (SGD.reached): test accuracy >= target; for target 1.0 a run's test ends at
    its first chunk with an error, as its solo run's does (among thousands of runs some run is right on every
    chunk, and testing all runs on all chunks then cost a whole test-set forward a run and epoch). On a CPU the
    runs are tested in cache-sized groups (cache_chunk), as they are stepped: 2,048 runs' (runs, 64, 200)
    activations at once made the test 8% of a solve."""
    R, T, H = xt.shape[0], xt.shape[1], p["W1"].shape[1]
    group = cache_chunk(be, (T if target < 1.0 else chunk) * H)
    ok = np.ones(R, dtype=bool)
    for lo in range(0, R, group):
        rows = slice(lo, lo + group)
        ok[rows] = reached_group(be, {k: v[rows] for k, v in p.items()}, xt[rows], yt[rows], target, chunk)
    return ok


def reached_group(be: Backend, p: Params, xt, yt, target: float, chunk: int) -> np.ndarray:
    xp = be.xp
    if target < 1.0:
        pred = xp.where(forward(xp, p, xt)[2] >= 0, 1.0, -1.0)
        return be.to_numpy(xp.mean(xp.astype(pred == yt, xt.dtype), axis=1)) >= target
    ok = np.ones(xt.shape[0], dtype=bool)
    ids, q, x, y = np.arange(ok.size), p, xt, yt  # the runs with no error yet: their weights and untested samples
    while x.shape[1]:
        out = forward(xp, q, x[:, :chunk])[2]
        passed = be.to_numpy(((out >= 0) == (y[:, :chunk] > 0)).all(1))
        ok[ids] = passed
        x, y = x[:, chunk:], y[:, chunk:]
        if not passed.all():  # the next chunks test only the runs still without an error, as a solo run stops
            ids = ids[passed]
            if ids.size == 0:
                break
            sel = be.index(np.flatnonzero(passed))
            q, x, y = {k: v[sel] for k, v in q.items()}, x[sel], y[sel]
    return ok


def train_runs(
    be: Backend,
    batch_size: int,
    max_epochs: int,
    stepper: Callable[[np.ndarray], Callable[[Params, Any, Any], None]],
    done: Callable[[Params, Any, Any], np.ndarray],
    logs: list[EpochLog],
    evaluate: RowsMeasure,
    p: Params,
    data: tuple,
    rngs: list[np.random.RandomState],
    running: np.ndarray,
    chunk: int,
) -> np.ndarray:
    """SGD's epoch loop for R runs; returns each run's epochs. ``running`` (R,) host bools: the runs that
    train. Each epoch every running run draws its own order from its own rng, ``stepper(ids)(q, xb, yb)``
    steps the batch of runs ``ids``, ``logs[r]`` keeps run r's epoch as row j of one Snapshot of the working
    weights (one copy per array an epoch, not one per run; ``evaluate`` gives all its rows' curves), and
    ``done(q, xt, yt)`` is each run's stopping test. The arrays hold only the running runs: when runs stop,
    the others are gathered into smaller arrays (a stopped run costs nothing more) and the stopped ones'
    weights written back to ``p``. A step runs ``chunk`` runs at a time, so that its temporaries stay in
    the core's cache (cache_chunk)."""
    keep_heap()
    running = running.copy()
    epochs = np.zeros(running.size, dtype=int)
    ids = np.arange(running.size)  # the runs in the working arrays q
    q, d = p, data
    m = data[0].shape[1]
    parts = chunks(q, ids, stepper, chunk)
    for epoch in range(max_epochs):
        if running[ids].sum() < ids.size:  # some run stopped: work on the running ones only
            ids, q, d = compact(be, p, q, ids, running, data)
            parts = chunks(q, ids, stepper, chunk)
        if ids.size == 0:
            break
        rows = flat_rows(be, orders(be, rngs, ids, m))
        xs, ys = gather(d[0], rows), gather(d[1], rows)
        for s in range(0, m, batch_size):
            xb, yb = xs[:, s : s + batch_size], ys[:, s : s + batch_size]
            for part, qc, step in parts:
                step(qc, xb[part], yb[part])
        snapshot = Snapshot({k: v * 1.0 for k, v in q.items()}, ids, evaluate)
        for j, r in enumerate(ids):
            logs[r].keep_row(snapshot, j)
        epochs[ids] = epoch + 1
        running[ids] &= ~done(q, d[2], d[3])
    compact(be, p, q, ids, np.zeros_like(running), data)
    return epochs


def orders(be: Backend, rngs: list[np.random.RandomState], ids: np.ndarray, m: int) -> np.ndarray:
    """This epoch's batch order of each run in ``ids``, drawn from its own rng as its solo run draws it. On a
    GPU a step of thousands of runs is quick and these draws are the host's share of each epoch, so they are
    spread over the host's cores (RandomState's shuffle releases the GIL; each rng is used by one thread). Under
    device.rng=counter all of them are one computation on the device."""
    if isinstance(rngs[0], counter_rng.CounterRNG):
        return counter_rng.permutations_of(be, [rngs[r] for r in ids], m)
    if not be.device.startswith("cuda") or ids.size < 256 or host_cores() < 2:
        return np.stack([rngs[r].permutation(m) for r in ids])
    parts = np.array_split(ids, host_cores())
    return np.concatenate(list(host_pool().map(lambda part: np.stack([rngs[r].permutation(m) for r in part]), parts)))


@functools.cache
def host_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@functools.cache
def host_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=host_cores(), thread_name_prefix="orders")


def cache_chunk(be: Backend, floats_per_run: int, budget_bytes: int = 1 << 20) -> int:
    """How many runs a step takes at once on this backend: on a CPU, as many as keep a (runs, B, H) temporary
    within ``budget_bytes``, about a core's L2 (past the caches a batched step slows down; budgets from half to
    four times that measured alike, an eighth of it slower: README, "Many runs as one solve"). On a GPU, all of
    them (its work is to be filled)."""
    if be.device.startswith("cuda"):
        return 1 << 30
    return max(1, budget_bytes // (floats_per_run * np.dtype(be.dtype).itemsize))


def chunks(q: Params, ids: np.ndarray, stepper: Callable, chunk: int) -> list[tuple[slice, Params, Callable]]:
    """The working runs in groups of ``chunk``: (their rows, their weights as views of q, their step)."""
    out = []
    for lo in range(0, ids.size, chunk):
        part = slice(lo, lo + chunk)
        out.append((part, {k: v[part] for k, v in q.items()}, stepper(ids[part])))
    return out


def flat_rows(be: Backend, perm: np.ndarray):
    """The rows of (runs x samples) flattened that put run r's samples in its order perm[r]; worked out once an
    epoch for every array that is taken in that order, on the backend's device."""
    R, m = perm.shape
    return (be.index(perm) + be.index(np.arange(R) * m)[:, None]).reshape(-1)


def gather(a, rows):
    """a[r][perm[r]] for every run r: one take of whole rows along a flattened runs x samples axis (numpy's
    two-array fancy indexing costs ~10x more here). np.take and index_select make the same copy as ``flat[rows]``,
    faster (README, "Many runs as one solve")."""
    flat = a.reshape((-1,) + tuple(a.shape[2:]))
    out = np.take(flat, rows, axis=0) if isinstance(flat, np.ndarray) else flat.index_select(0, rows)
    return out.reshape(tuple(a.shape))


def compact(be: Backend, p: Params, q: Params, ids: np.ndarray, running: np.ndarray, data: tuple):
    """Write the working weights q (runs ``ids``) back into p, and gather the running runs' weights and data."""
    if q is not p:
        for k in p:
            p[k][be.index(ids)] = q[k]
    ids = np.flatnonzero(running)
    sel = be.index(ids)
    return ids, {k: v[sel] for k, v in p.items()}, tuple(a[sel] for a in data)
