"""sparse_and: label +1 iff all k secret bits are +1 (else -1), i.e. the minimum of the secret bits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from array_api_compat import array_namespace

from sweep.problems.base import Problem


@dataclass
class SparseAnd(Problem):
    name: str = "sparse_and"
    combine_op: ClassVar[str] = "max"  # a minimum: one compare-select, priced like relu's max

    def combine(self, a, b):
        return array_namespace(a, b).minimum(a, b)

    def feasible(self, xp, partial, y, remaining: int) -> bool:
        # the minimum never rises: a row already at -1 cannot end at +1
        return not bool(xp.any((partial < 0) & (y > 0)))
