"""sparse_parity: label = product of the k secret bits."""
from __future__ import annotations

from dataclasses import dataclass

from sweep.problems.base import Problem


@dataclass
class SparseParity(Problem):
    name: str = "sparse_parity"

    def labels(self, x, secret):
        y = x[..., secret[0]]
        for i in secret[1:]:
            y = y * x[..., i]
        return y
