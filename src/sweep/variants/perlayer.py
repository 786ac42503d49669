"""variant=perlayer: per layer forward, backward and update, top layer first (seed 001 "perlayer").

The gradient buffers (dout, dW2, db2, dh, dh_pre) live only inside the fused update, so they are not traced,
and there are no margin reads. W2 is updated before dh is taken from it, so dh uses the *updated* W2: the
math differs slightly from standard (it still converges).
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.trace.trace import Trace
from sweep.variants.base import Params, Update, Variant, forward, hinge_dout


@dataclass
class PerLayer(Variant):
    name: str = "perlayer"

    def step(self, xp, p: Params, x, y, update: Update, trace: Trace) -> bool:
        R, W = trace.read, trace.write
        h_pre, h, out = forward(xp, p, x, trace)
        dout = hinge_dout(xp, out, y, trace, update.scale, reads=False)  # the margin test is fused too
        if dout is None:
            return False
        (B, n), H = x.shape, p["W2"].shape[1]
        # layer 2: gradient from h, update W2 and b2 in place
        R("h", h)
        R("W2", H)
        dW2 = dout[None, :] @ h
        trace.compute("fma", B * H)
        R("W2", H)
        update(p["W2"], dW2, True)
        update.count(trace, H, True)
        W("W2", H)
        R("b2", 1)
        update(p["b2"], dout.sum(0, keepdims=True), False)
        trace.compute("add", B)
        update.count(trace, 1, False)
        W("b2", 1)
        # layer 1: dh from the updated W2, relu backward, update W1 and b1
        R("h_pre", h_pre)
        dh_pre = dout[:, None] * p["W2"]
        dh_pre *= h_pre > 0
        trace.compute("mul", 2 * B * H)
        trace.compute("cmp", B * H)
        R("x", x)
        R("W1", p["W1"])
        update(p["W1"], dh_pre.T @ x, True)
        trace.compute("fma", B * n * H)
        update.count(trace, n * H, True)
        W("W1", p["W1"])
        R("b1", H)
        update(p["b1"], dh_pre.sum(0), False)
        trace.compute("add", B * H)
        update.count(trace, H, False)
        W("b1", H)
        return True
