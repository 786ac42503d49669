"""The phases of one SGD step (docs/traces.md), each doing its arithmetic and emitting its events, so
variants that only reorder phases (fused) or tile some of them (tiled) share them."""

from __future__ import annotations

from typing import Any, Callable, Optional

from sweep.trace.trace import Trace
from sweep.variants.base import Params, Update


def layer2_grad(
    xp, p: Params, h, dout, trace: Trace, read_h: Optional[Callable[[], None]] = None, with_dh: bool = True
):
    """LAYER-2 GRAD: dW2 = dout h, db2 = sum dout, dh = dout W2 (the weights before any update).
    ``read_h`` emits the reads of h (tiled reads it tile by tile); ``with_dh=False``: dh is left to the caller
    (tiled_fused takes it tile by tile) and None is returned for it."""
    R, W = trace.read, trace.write
    H = p["W2"].shape[1]
    W("dout", dout)
    R("dout", dout)
    if read_h is None:
        R("h", h)
    else:
        read_h()
    dW2 = dout[None, :] @ h
    B = dout.shape[0]
    trace.compute("fma", B * H)
    W("dW2", H)
    db2 = dout.sum(0, keepdims=True)
    trace.compute("add", B)
    W("db2", 1)
    if not with_dh:
        return dW2, db2, None
    R("W2", H)
    R("dout", dout)
    dh = dout[:, None] * p["W2"]
    trace.compute("mul", B * H)
    W("dh", dh)
    return dW2, db2, dh


def relu_backward(xp, h_pre, dh, trace: Trace, suffix: str = "") -> Any:
    """RELU BWD: dh_pre = dh where h_pre > 0, else 0. Computed in dh's memory (dh is dead after this, so no
    new (B, H) array), which makes the returned dh_pre the same array as dh."""
    trace.read("dh" + suffix, dh)
    trace.read("h_pre" + suffix, h_pre)
    dh *= h_pre > 0  # the relu mask as a product: where()'s values, faster
    trace.compute("cmp", dh)
    trace.compute("mul", dh)
    trace.write("dh_pre" + suffix, dh)
    return dh


def layer1_update(xp, W1, b1, x, dh_pre, update: Update, trace: Trace, suffix: str = "") -> None:
    """LAYER-1 UPDATE of W1 and b1 (or one tile of them: views, updated in place) from dh_pre."""
    R, W = trace.read, trace.write
    R("dh_pre" + suffix, dh_pre)
    R("x", x)
    R("W1" + suffix, W1)
    update(W1, dh_pre.T @ x, True)
    (B, s), n = dh_pre.shape, x.shape[1]
    trace.compute("fma", B * n * s)
    update.count(trace, n * s, True)
    W("W1" + suffix, W1)
    R("dh_pre" + suffix, dh_pre)
    R("b1" + suffix, b1)
    update(b1, dh_pre.sum(0), False)
    trace.compute("add", B * s)
    update.count(trace, s, False)
    W("b1" + suffix, b1)


def layer2_update(p: Params, dW2, db2, update: Update, trace: Trace) -> None:
    """LAYER-2 UPDATE of W2 and b2 from the stored gradients."""
    R, W = trace.read, trace.write
    H = p["W2"].shape[1]
    R("dW2", H)
    R("W2", H)
    update(p["W2"], dW2, True)
    update.count(trace, H, True)
    W("W2", H)
    R("db2", 1)
    R("b2", 1)
    update(p["b2"], db2, False)
    update.count(trace, 1, False)
    W("b2", 1)
