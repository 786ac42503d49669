"""variant=tiled: W1 processed in tiles of `variant.tile_size` hidden units (seed 003 "tiled W1").

Each tile's forward runs tile by tile, the output layer needs all of h, then each tile's backward and update
run tile by tile. The parameters stay whole arrays (tiles are views, updated in place), so the arithmetic is
standard's; only the trace names and order differ. dh is written whole but read per tile under the name
dh_tile{t}, a cold read, as in the group's measurement. tile_size must divide method.hidden
(Tiled.check_config), for every tiled variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from sweep.config.fields import Rule
from sweep.errors import ConfigError
from sweep.trace.trace import Trace
from sweep.variants.base import Params, Update, Variant, hinge_dout, relu
from sweep.variants.blocks import layer1_update, layer2_grad, layer2_update, relu_backward


@dataclass
class Tiled(Variant):
    name: str = "tiled"
    field_rules: ClassVar[tuple[Rule, ...]] = ()  # tile_size: check_config, against method.hidden

    tile_size: int = 100

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """tile_size must divide method.hidden (the error lists the divisors that would)."""
        variant = cfg.select("variant.name")
        hidden = cfg.select("method.hidden")
        if not isinstance(hidden, int) or hidden < 1:
            raise ConfigError(
                f"variant={variant} needs a method with hidden units (method.hidden); "
                f"method={cfg.select('method.name', '?')} has none"
            )
        size = cfg.select("variant.tile_size")
        divisors = [d for d in range(1, hidden + 1) if hidden % d == 0]
        if size not in divisors or isinstance(size, bool):
            raise ConfigError(
                f"variant.tile_size={size!r} is not allowed: expected a divisor of "
                f"method.hidden={hidden}: one of {', '.join(map(str, divisors))}"
            )

    def tiles(self, hidden: int) -> list[tuple[int, int]]:
        """(start, stop) hidden-unit ranges; the last tile may be smaller."""
        T = self.tile_size
        return [(lo, min(lo + T, hidden)) for lo in range(0, hidden, T)]

    def w1_buffers(self, hidden: int, n_in: int) -> list[tuple[str, int]]:
        return [(f"W1_tile{t}", n_in * (hi - lo)) for t, (lo, hi) in enumerate(self.tiles(hidden))]

    def init_trace(self, trace: Trace, p: Params) -> None:
        n = p["W1"].shape[1]
        for t, (lo, hi) in enumerate(self.tiles(p["W1"].shape[0])):
            trace.write(f"W1_tile{t}", n * (hi - lo))
            trace.write(f"b1_tile{t}", hi - lo)
        trace.write("W2", p["W2"])
        trace.write("b2", p["b2"])

    def tile_forward(self, xp, x, W1, b1, t: int, trace: Trace):
        """FWD of tile t (W1, b1: the tile's views): h_pre_tile = x W1_t^T + b1_t, h_tile = relu(h_pre_tile)."""
        R, W = trace.read, trace.write
        R("x", x)
        R(f"W1_tile{t}", W1)
        R(f"b1_tile{t}", b1)
        hp = x @ W1.T + b1
        trace.compute("fma", hp.shape[0] * x.shape[1] * W1.shape[0])
        trace.compute("add", hp)
        W(f"h_pre_tile{t}", hp)
        R(f"h_pre_tile{t}", hp)
        h = relu(xp, hp)
        trace.compute("max", hp)
        W(f"h_tile{t}", h)
        return hp, h

    def forward(self, xp, p: Params, x, trace: Trace):
        """Every tile's forward, then the output layer on all of h (it needs every tile). Returns the tiles'
        h_pre, h whole, out, and ``read_h`` (the reads of h, tile by tile)."""
        R, W = trace.read, trace.write
        h_pre_t, h_t = [], []
        for t, (lo, hi) in enumerate(self.tiles(p["W1"].shape[0])):
            hp, h = self.tile_forward(xp, x, p["W1"][lo:hi], p["b1"][lo:hi], t, trace)
            h_pre_t.append(hp)
            h_t.append(h)

        def read_h() -> None:
            for t, ht in enumerate(h_t):
                R(f"h_tile{t}", ht)

        read_h()
        h = xp.concat(h_t, axis=1)
        R("W2", p["W2"])
        R("b2", 1)
        out = h @ p["W2"][0] + p["b2"]
        trace.compute("fma", h)
        trace.compute("add", out)
        W("out", out)
        return h_pre_t, h, out, read_h

    def step(self, xp, p: Params, x, y, update: Update, trace: Trace) -> bool:
        W1, b1 = p["W1"], p["b1"]
        h_pre_t, h, out, read_h = self.forward(xp, p, x, trace)
        dout = hinge_dout(xp, out, y, trace, update.scale)
        if dout is None:
            return False
        dW2, db2, dh = layer2_grad(xp, p, h, dout, trace, read_h=read_h)
        # backward and layer-1 update, tile by tile
        for t, (lo, hi) in enumerate(self.tiles(W1.shape[0])):
            sfx = f"_tile{t}"
            dh_pre = relu_backward(xp, h_pre_t[t], dh[:, lo:hi], trace, suffix=sfx)
            layer1_update(xp, W1[lo:hi], b1[lo:hi], x, dh_pre, update, trace, suffix=sfx)
        layer2_update(p, dW2, db2, update, trace)
        return True
