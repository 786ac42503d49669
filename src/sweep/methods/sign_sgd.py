"""method=sign_sgd: SGD whose update is W -= lr * sign(grad) (Kou et al. 2024; seed 002).

Only the optimiser differs from sgd: same net, loop, variants and trace. The sign is taken of the gradient of
the regularised loss (weight decay included), so a parameter with no gradient still decays toward zero.
"""
from __future__ import annotations

from dataclasses import dataclass

from sweep.methods.sgd import SGD
from sweep.variants.base import Update


@dataclass
class SignSGD(SGD):
    name: str = "sign_sgd"
    lr: float = 0.01

    def make_update(self, xp) -> Update:
        lr, wd = self.lr, self.wd

        def update(p, g, decay: bool) -> None:
            p -= lr * xp.sign(g + wd * p if decay else g)

        return update
