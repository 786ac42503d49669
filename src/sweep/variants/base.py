"""A training variant: the order in which one SGD step of the 2-layer MLP reads, computes and writes.

Each variant emits the trace events of docs/traces.md from the same code that does the arithmetic, so the
trace describes what the step really did. Parameters: dict W1 (H, n), b1 (H,), W2 (1, H), b2 (1,).
``update(p, g, decay)`` applies the optimiser in place (sgd or sign_sgd, weight decay included).

The step is the hot loop of every SGD-like method (~1250 steps a run at n=20 on 32-sample batches of
200-unit arrays), where a numpy call costs more in overhead than in arithmetic; so it uses array methods
(``a.sum(0)``, ``a.any()``, the same on numpy and torch) rather than the namespace's Python wrappers, and makes
no array operation that the result does not need.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from sweep.config.fields import Rule
from sweep.trace.trace import Trace

Params = dict[str, Any]


class Update(Protocol):
    """The optimiser: ``update(param, g, decay)`` changes param in place, where g is the loss gradient times
    ``scale``. The step folds ``scale`` into dout, the B floats every gradient is a product of, so SGD's
    learning rate costs no full-size multiply per parameter. ``decay``: apply weight decay (weights, not
    biases)."""

    scale: float

    def __call__(self, param: Any, g: Any, decay: bool) -> None: ...

    def count(self, trace: Trace, size: int, decay: bool) -> None:
        """Report the arithmetic of one call on a parameter of ``size`` floats (Trace.compute)."""


@dataclass
class Variant:
    """What a variant is: the class a conf/variant/ option's `_target_` names. A subclass implements `step`; the
    rest has its default here. It applies to the methods that declare `takes_variant` (MethodBase)."""

    # only the tiled variants take a tile size (sweep.variants.tiled): elsewhere a size would be recorded unused
    field_rules: ClassVar[tuple[Rule, ...]] = (
        Rule("variant.tile_size", "0: only the tiled variants (variant=tiled*) take a tile size", lambda v, c: v == 0),
    )

    name: str = "standard"
    tile_size: int = 0  # only the tiled variants use it

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """What a field's rule cannot say (sweep.config.check, stage 3): raise ConfigError naming the field."""

    def init_trace(self, trace: Trace, p: Params) -> None:
        """The writes that put the parameters in memory (INIT in the spec, before x and y)."""
        for k in ("W1", "b1", "W2", "b2"):
            trace.write(k, p[k])

    def w1_buffers(self, hidden: int, n_in: int) -> list[tuple[str, int]]:
        """The trace buffers W1 is kept in, (name, floats) each: one here, one per tile when tiled (a method
        that reshapes W1 between steps, curriculum's widening, reads and writes it under these names)."""
        return [("W1", hidden * n_in)]

    def step(self, xp, p: Params, x, y, update: Update, trace: Trace) -> bool:
        """One step on the batch (x: (B, n), y: (B,)); returns False when every margin is >= 1, and then has
        changed no parameter (so the step can be repeated; the trace templates of SGD's loop rely on it)."""
        raise NotImplementedError


def forward(xp, p: Params, x, trace: Trace):
    """FWD of docs/traces.md: h_pre = x W1^T + b1, h = relu(h_pre), out = h W2^T + b2."""
    trace.read("x", x)
    trace.read("W1", p["W1"])
    trace.read("b1", p["b1"])
    h_pre = x @ p["W1"].T
    h_pre += p["b1"]  # in place: no second (B, H) array
    (B, n), H = x.shape, h_pre.shape[1]
    trace.compute("fma", B * n * H)
    trace.compute("add", B * H)
    trace.write("h_pre", h_pre)
    trace.read("h_pre", h_pre)
    h = relu(xp, h_pre)
    trace.compute("max", B * H)
    trace.write("h", h)
    trace.read("h", h)
    trace.read("W2", p["W2"])
    trace.read("b2", p["b2"])
    out = h @ p["W2"][0] + p["b2"]
    trace.compute("fma", B * H)
    trace.compute("add", B)
    trace.write("out", out)
    return h_pre, h, out


# Floats of the zeros relu compares numpy arrays with (per dtype, one buffer); larger arrays take the scalar 0.
RELU_ZEROS = 1 << 18


def relu(xp, a):
    """max(a, 0), a new array, equal in value to ``xp.maximum(a, 0.0)`` (on numpy bit for bit; torch's clamp_min
    may keep a -0.0 or a NaN's payload). numpy's maximum has no SIMD loop for a scalar operand (3x slower, README
    "Many runs as one solve"), so a numpy array is compared with a view of a zeros buffer; a torch tensor takes
    its own clamp_min, without array_api_compat's wrapper and its scalar promotion."""
    if not isinstance(a, np.ndarray):
        return a.clamp_min(0.0)
    if a.size > RELU_ZEROS or not a.flags.c_contiguous or a.__class__ is not np.ndarray:
        # an ndarray subclass (an automatic trace's TracedArray) compares with 0.0 itself: the zeros buffer is a
        # speed trick of plain arrays, and a traced relu is max(a, 0), reading a alone
        return np.maximum(a, 0.0)
    return np.maximum(a, _zeros(a.dtype)[: a.size].reshape(a.shape))


@functools.cache
def _zeros(dtype) -> np.ndarray:
    z = np.zeros(RELU_ZEROS, dtype)
    z.flags.writeable = False  # shared by every call: nothing may write into it
    return z


def hinge_dout(xp, out, y, trace: Trace, scale: float, reads: bool = True):
    """MARGIN: the gradient of the hinge loss max(0, 1 - y out), averaged over the batch, with respect to out,
    times ``scale`` (Update.scale); None if no sample is active. ``reads=False``: the margin test is fused
    into the step (perlayer), so out and y are not traced as reads; the arithmetic is counted either way."""
    if reads:
        trace.read("out", out)
        trace.read("y", y)
    active = (out * y) < 1.0
    B = out.shape[0]
    trace.compute("mul", B)
    trace.compute("cmp", B)
    if not bool(active.any()):
        return None
    trace.compute("mul", B)
    return xp.where(active, y * (-scale / B), 0.0)
