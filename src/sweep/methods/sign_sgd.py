"""method=sign_sgd: SGD whose update is W -= lr * sign(grad) (Kou et al. 2024; seed 002).

Only the optimiser differs from sgd: same net, loop, variants and trace. The sign is taken of the gradient of
the regularised loss (weight decay included), so a parameter with no gradient still decays toward zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sweep.config.fields import METHOD_RULES, Rule, nonneg_finite
from sweep.methods.batched import RunsUpdate
from sweep.methods.sgd import SGD
from sweep.trace.trace import Trace
from sweep.variants.base import Update


@dataclass
class SignSGD(SGD):
    # the sign update is written for the hinge-loss MLP (sparse_sum's linear model is sgd's)
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity", "sparse_and")
    name: str = "sign_sgd"
    lr: float = 0.01
    field_rules: ClassVar[tuple[Rule, ...]] = (
        *METHOD_RULES,
        Rule("method.dead_zone", "a finite number >= 0 (|grad| at or below it counts as zero)", nonneg_finite),
    )

    dead_zone: float = 1e-12  # |grad| at or below this counts as zero (rounding noise has no sign)

    def make_update(self, xp) -> Update:
        return SignUpdate(xp, self.lr, self.wd, self.dead_zone)

    def runs_update(self, be, lr: np.ndarray, wd: np.ndarray) -> RunsUpdate:
        return RunsUpdate(be, lr, wd, sign=True, dead_zone=self.dead_zone)


class SignUpdate:
    """p <- p - lr sign(grad + wd p); the gradient arrives unscaled (scale 1: its sign is all that counts)."""

    scale = 1.0

    def __init__(self, xp: Any, lr: float, wd: float, dead_zone: float) -> None:
        self.xp, self.lr, self.wd, self.noise = xp, lr, wd, dead_zone

    def __call__(self, p: Any, g: Any, decay: bool) -> None:
        xp = self.xp
        if decay:
            g = g + self.wd * p
        # a gradient within rounding noise of zero has no sign: numpy and torch sum in different orders,
        # and stepping +lr or -lr on that noise would make their runs drift apart
        p -= self.lr * xp.sign(xp.where(xp.abs(g) > self.noise, g, 0.0))

    def count(self, trace: Trace, size: int, decay: bool) -> None:
        if decay:
            trace.compute("fma", size)  # g + wd p
        trace.compute("cmp", size)  # |g| > dead zone (abs is a sign-bit clear, not counted)
        trace.compute("sign", size)
        trace.compute("mul", size)
        trace.compute("add", size)
