"""variant=standard: forward, all gradients, then all updates (seed 001 "standard")."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.trace.trace import Trace
from sweep.variants.base import Params, Update, Variant, forward, hinge_dout
from sweep.variants.blocks import layer1_update, layer2_grad, layer2_update, relu_backward


@dataclass
class Standard(Variant):
    name: str = "standard"

    def step(self, xp, p: Params, x, y, update: Update, trace: Trace) -> bool:
        h_pre, h, out = forward(xp, p, x, trace)
        dout = hinge_dout(xp, out, y, trace, update.scale)
        if dout is None:
            return False
        dW2, db2, dh = layer2_grad(xp, p, h, dout, trace)
        dh_pre = relu_backward(xp, h_pre, dh, trace)
        layer1_update(xp, p["W1"], p["b1"], x, dh_pre, update, trace)
        layer2_update(p, dW2, db2, update, trace)
        return True
