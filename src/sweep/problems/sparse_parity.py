"""sparse_parity: label = product of the k secret bits."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.problems.base import Problem


@dataclass
class SparseParity(Problem):
    name: str = "sparse_parity"

    def combine(self, a, b):
        return a * b
