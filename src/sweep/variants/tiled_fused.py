"""variant=tiled_fused: tiled W1 with each tile's backward and update done as soon as the math allows (seed 003's
open question 2, "a fully tiled step").

The math does not allow a tile's backward right after its own forward: the hinge margin needs the whole output,
so every tile's forward (and the output layer on all of h) comes first, as in ``tiled``. What changes is the
backward: instead of dh written whole and read per tile (tiled's cold ``dh_tile`` reads), each tile takes its
own slice dh_t = dout W2_t and runs its relu backward and W1/b1 update at once, so dh_t is read right after it
is written. dW2 and db2 are taken first (they need all of h), and W2 is updated last, after every tile read its
slice: the arithmetic is standard's, only the order differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.trace.trace import Trace
from sweep.variants.base import Params, Update, hinge_dout
from sweep.variants.blocks import layer1_update, layer2_grad, layer2_update, relu_backward
from sweep.variants.tiled import Tiled


@dataclass
class TiledFused(Tiled):
    name: str = "tiled_fused"

    def step(self, xp, p: Params, x, y, update: Update, trace: Trace) -> bool:
        R, W = trace.read, trace.write
        W1, b1, W2 = p["W1"], p["b1"], p["W2"]
        h_pre_t, h, out, read_h = self.forward(xp, p, x, trace)
        dout = hinge_dout(xp, out, y, trace, update.scale)
        if dout is None:
            return False
        dW2, db2, _ = layer2_grad(xp, p, h, dout, trace, read_h=read_h, with_dh=False)
        for t, (lo, hi) in enumerate(self.tiles(W1.shape[0])):
            sfx = f"_tile{t}"
            R("W2", hi - lo)
            R("dout", dout)  # the tile's slice of W2, before W2's update
            dh = dout[:, None] * W2[:, lo:hi]
            trace.compute("mul", dh)
            W("dh" + sfx, dh)
            dh_pre = relu_backward(xp, h_pre_t[t], dh, trace, suffix=sfx)
            layer1_update(xp, W1[lo:hi], b1[lo:hi], x, dh_pre, update, trace, suffix=sfx)
        layer2_update(p, dW2, db2, update, trace)
        return True
