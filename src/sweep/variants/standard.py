"""variant=standard: forward, all gradients, then all updates (seed 001 "standard")."""
from __future__ import annotations

from dataclasses import dataclass

from sweep.trackers.trace import Trace, numel
from sweep.variants.base import Params, Update, Variant, forward, hinge_dout


@dataclass
class Standard(Variant):
    name: str = "standard"

    def step(self, xp, p: Params, x, y, update: Update, trace: Trace) -> bool:
        R, W = trace.read, trace.write
        h_pre, h, out = forward(xp, p, x, trace)
        dout = hinge_dout(xp, out, y, trace)
        if dout is None:
            return False
        H = numel(p["b1"])
        # layer-2 gradient
        W("dout", numel(dout)); R("dout", numel(dout)); R("h", numel(h))
        dW2 = dout[None, :] @ h
        W("dW2", H)
        db2 = xp.sum(dout, keepdims=True)
        W("db2", 1)
        R("W2", H); R("dout", numel(dout))
        dh = dout[:, None] * p["W2"]
        W("dh", numel(dh))
        # relu backward
        R("dh", numel(dh)); R("h_pre", numel(h_pre))
        dh_pre = dh * (h_pre > 0)  # the relu mask as a product: where()'s result, bit for bit, and faster
        W("dh_pre", numel(dh_pre))
        # layer-1 update
        R("dh_pre", numel(dh_pre)); R("x", numel(x)); R("W1", numel(p["W1"]))
        update(p["W1"], dh_pre.T @ x, True)
        W("W1", numel(p["W1"]))
        R("dh_pre", numel(dh_pre)); R("b1", H)
        update(p["b1"], xp.sum(dh_pre, axis=0), False)
        W("b1", H)
        # layer-2 update
        R("dW2", H); R("W2", H)
        update(p["W2"], dW2, True)
        W("W2", H)
        R("db2", 1); R("b2", 1)
        update(p["b2"], db2, False)
        W("b2", 1)
        return True
