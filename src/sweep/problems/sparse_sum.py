"""sparse_sum: label = sum of the k secret bits (an integer in -k..k); accuracy is on the rounded prediction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sweep.problems.base import Problem


@dataclass
class SparseSum(Problem):
    loss: ClassVar[str] = "squared"  # integer labels: a regression target, accuracy on the rounded prediction
    fourier_degree: ClassVar[int | None] = 1  # linear in the bits: the secret bits are the degree-one peaks

    name: str = "sparse_sum"

    combine_op: ClassVar[str] = "add"

    def combine(self, a, b):
        return a + b

    def decide(self, xp, out):
        return xp.round(out)

    def feasible(self, xp, partial, y, remaining: int) -> bool:
        # each further bit moves the sum by exactly 1
        return bool(xp.all(xp.abs(y - partial) <= remaining))
