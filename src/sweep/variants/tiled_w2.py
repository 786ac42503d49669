"""variant=tiled_w2: W2 tiled with W1, so that h never exists whole (seed 003's open question 3, "tile the
output layer to keep h_tile in cache").

Tile t holds W1_t, b1_t and W2_t (the output weights of its hidden units). Forward: each tile's h_tile goes
into the output at once, out = b2 + sum_t h_t W2_t accumulated tile by tile, so h_tile is read right after it
is written. After the margin (which needs the whole out) each tile runs its whole backward as tiled_fused
does, layer 2 included: dW2_t = dout h_t, dh_t = dout W2_t from the weights before their update, then W2_t's
update, the relu backward and W1_t/b1_t's update. b2 is updated last. Standard's arithmetic (the output's sum
is only split by tile).
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.trace.trace import Trace
from sweep.variants.base import Params, Update, hinge_dout
from sweep.variants.blocks import layer1_update, relu_backward
from sweep.variants.tiled import Tiled


@dataclass
class TiledW2(Tiled):
    name: str = "tiled_w2"

    def init_trace(self, trace: Trace, p: Params) -> None:
        n = p["W1"].shape[1]
        for t, (lo, hi) in enumerate(self.tiles(p["W1"].shape[0])):
            trace.write(f"W1_tile{t}", n * (hi - lo))
            trace.write(f"b1_tile{t}", hi - lo)
            trace.write(f"W2_tile{t}", hi - lo)
        trace.write("b2", p["b2"])

    def step(self, xp, p: Params, x, y, update: Update, trace: Trace) -> bool:
        R, W, C = trace.read, trace.write, trace.compute
        W1, b1, W2 = p["W1"], p["b1"], p["W2"]
        tiles = self.tiles(W1.shape[0])
        B = x.shape[0]
        h_pre_t, h_t = [], []
        out = None
        for t, (lo, hi) in enumerate(tiles):
            hp, h = self.tile_forward(xp, x, W1[lo:hi], b1[lo:hi], t, trace)
            h_pre_t.append(hp)
            h_t.append(h)
            R(f"h_tile{t}", h)
            R(f"W2_tile{t}", hi - lo)
            part = h @ W2[0, lo:hi]
            C("fma", h)
            if out is None:  # the first tile starts the sum from b2
                R("b2", 1)
                out = part + p["b2"]
            else:
                R("out", out)
                out = out + part
            C("add", B)
            W("out", out)
        dout = hinge_dout(xp, out, y, trace, update.scale)
        if dout is None:
            return False
        W("dout", dout)
        R("dout", dout)
        db2 = dout.sum(0, keepdims=True)
        C("add", B)
        W("db2", 1)
        for t, (lo, hi) in enumerate(tiles):
            sfx, s = f"_tile{t}", hi - lo
            R("dout", dout)
            R("h" + sfx, h_t[t])
            dW2 = dout[None, :] @ h_t[t]
            C("fma", h_t[t])
            W("dW2" + sfx, s)
            R("W2" + sfx, s)
            R("dout", dout)
            dh = dout[:, None] * W2[:, lo:hi]  # before W2_t's update, as standard
            C("mul", dh)
            W("dh" + sfx, dh)
            R("dW2" + sfx, s)
            R("W2" + sfx, s)
            update(W2[:, lo:hi], dW2, True)
            update.count(trace, s, True)
            W("W2" + sfx, s)
            dh_pre = relu_backward(xp, h_pre_t[t], dh, trace, suffix=sfx)
            layer1_update(xp, W1[lo:hi], b1[lo:hi], x, dh_pre, update, trace, suffix=sfx)
        R("db2", 1)
        R("b2", 1)
        update(p["b2"], db2, False)
        update.count(trace, 1, False)
        W("b2", 1)
        return True
