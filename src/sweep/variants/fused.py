"""variant=fused: each layer is updated right after its gradient (seed 001 "fused").

Same arithmetic as standard (dh is taken from W2 before W2's update), only the order of the phases changes:
forward, margin, layer-2 gradient, layer-2 update, relu backward, layer-1 update.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.trace.trace import Trace
from sweep.variants.base import Params, Update, Variant, forward, hinge_dout
from sweep.variants.blocks import layer1_update, layer2_grad, layer2_update, relu_backward


@dataclass
class Fused(Variant):
    name: str = "fused"

    def step(self, xp, p: Params, x, y, update: Update, trace: Trace) -> bool:
        h_pre, h, out = forward(xp, p, x, trace)
        dout = hinge_dout(xp, out, y, trace, update.scale)
        if dout is None:
            return False
        dW2, db2, dh = layer2_grad(xp, p, h, dout, trace)
        layer2_update(p, dW2, db2, update, trace)
        dh_pre = relu_backward(xp, h_pre, dh, trace)
        layer1_update(xp, p["W1"], p["b1"], x, dh_pre, update, trace)
        return True
