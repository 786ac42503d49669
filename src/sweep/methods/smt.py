"""method=smt: constraint search for a k-subset consistent with every training example (seed 002).

A depth-first backtracking over increasing index tuples: a partial subset carries its partial label (the fold
of its bits under the problem's ``combine``) on a few screening rows, and a branch is pruned as soon as the
problem says no completion can match the labels (``feasible``: AND's minimum never rises, a sum moves by one
per bit). The last two levels, the (k-1)-th and the k-th index, are not looped: every pair is extended in one
batched array operation and matched against the labels at once. Candidates that fit the screening rows are
checked on the whole training set; the first that fits is the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Optional

import numpy as np

from sweep.config.fields import Rule, nonneg_int, positive_int
from sweep.methods.base import Context, Outcome, subset_outcome


@dataclass
class SMT:
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity", "sparse_and", "sparse_sum")
    vectorised: ClassVar[tuple[str, ...]] = ("problem.seed",)  # a batch: several runs in one task
    field_rules: ClassVar[tuple[Rule, ...]] = (
        Rule("method.screen_rows", "an integer >= 0 (0: 2 log2 C(n_bits, k_sparse) + 16)", nonneg_int),
        Rule("method.pair_block", "an integer >= 1", positive_int),
    )

    name: str = "smt"
    screen_rows: int = 0  # 0: 2 log2 C(n, k) + 16, enough that a wrong subset rarely survives screening
    pair_block: int = 4_000_000  # elements per batched pair extension (bounds memory at large n)

    def solve(self, ctx: Context) -> Outcome:
        be, d, prob = ctx.backend, ctx.data, ctx.problem
        n, k = prob.n_bits, prob.k_sparse
        m = min(d.x_train.shape[0], self.screen_rows or int(2 * math.log2(max(math.comb(n, k), 2))) + 16)
        self._ctx, self._n, self._k = ctx, n, k
        self._xs, self._ys = be.asarray(d.x_train[:m]), be.asarray(d.y_train[:m])
        self._x, self._y = be.asarray(d.x_train), be.asarray(d.y_train)
        self.nodes = self.checked = 0
        ctx.trace.write("x", self._x.shape[0] * n)
        ctx.trace.write("y", self._y.shape[0])
        ctx.trace.read("x", m * n)  # the screening rows are a copy of the first m rows
        ctx.trace.read("y", m)
        ctx.trace.write("x_screen", m * n)
        ctx.trace.write("y_screen", m)
        found = self._search((), None) or ()
        return subset_outcome(
            prob, d, found, nodes=float(self.nodes), candidates_checked=float(self.checked), screen_rows=float(m)
        )

    def _search(self, prefix: tuple[int, ...], partial) -> Optional[tuple[int, ...]]:
        """Backtrack over prefixes of length k - 2; each one ends in a batched pair step."""
        ctx, xp, prob, n, k = self._ctx, self._ctx.backend.xp, self._ctx.problem, self._n, self._k
        self.nodes += 1
        if partial is not None:
            ctx.trace.read("partial", partial.shape[0])
            ctx.trace.read("y_screen", partial.shape[0])
            ctx.trace.compute("cmp", partial.shape[0])
            if not prob.feasible(xp, partial, self._ys, k - len(prefix)):
                return None  # pruned: no completion of this prefix can fit the screening rows
        if len(prefix) >= k - 2:
            return self._last_levels(prefix, partial)
        start = prefix[-1] + 1 if prefix else 0
        for i in range(start, n - (k - len(prefix)) + 1):
            col = self._xs[:, i]
            ctx.trace.read("x_screen", col.shape[0])
            if partial is None:
                nxt = col
            else:
                ctx.trace.read("partial", col.shape[0])
                nxt = prob.combine(partial, col)
                ctx.trace.compute(prob.combine_op, col.shape[0])
            ctx.trace.write("partial", col.shape[0])
            hit = self._search(prefix + (i,), nxt)
            if hit is not None:
                return hit
        return None

    def _last_levels(self, prefix: tuple[int, ...], partial) -> Optional[tuple[int, ...]]:
        """All completions of the prefix by its last 1 or 2 indices, matched against the labels at once."""
        ctx, be, xp, prob, n = self._ctx, self._ctx.backend, self._ctx.backend.xp, self._ctx.problem, self._n
        xs, ys = self._xs, self._ys
        m, left, start = xs.shape[0], self._k - len(prefix), (prefix[-1] + 1 if prefix else 0)
        if left == 1:
            ext = xs if partial is None else prob.combine(partial[:, None], xs)  # (m, n): prefix + each bit
            ctx.trace.read("x_screen", m * n)
            ctx.trace.read("y_screen", m)
            if partial is not None:
                ctx.trace.read("partial", m)
                ctx.trace.compute(prob.combine_op, m * n)
            match = xp.all(ext == ys[:, None], axis=0)
            ctx.trace.compute("cmp", m * n)
            ctx.trace.write("match", n)
            ctx.trace.read("match", n)
            pairs = [(int(j),) for j in np.flatnonzero(be.to_numpy(match)) if j >= start]
            return self._verify(prefix, pairs)
        block = max(1, self.pair_block // (m * n))
        for i0 in range(start, n - 1, block):
            i1 = min(i0 + block, n - 1)
            first = xs[:, i0:i1] if partial is None else prob.combine(partial[:, None], xs[:, i0:i1])
            ext = prob.combine(first[:, :, None], xs[:, None, :])  # (m, i, j): prefix + bits i and j
            ctx.trace.read("x_screen", m * (i1 - i0 + n))
            if partial is not None:
                ctx.trace.read("partial", m)
            ctx.trace.compute(prob.combine_op, m * (i1 - i0) * (n + (partial is not None)))
            ctx.trace.write("ext", m * (i1 - i0) * n)
            ctx.trace.read("ext", m * (i1 - i0) * n)
            ctx.trace.read("y_screen", m)
            match = be.to_numpy(xp.all(ext == ys[:, None, None], axis=0))
            ctx.trace.compute("cmp", m * (i1 - i0) * n)
            ctx.trace.write("match", (i1 - i0) * n)
            ctx.trace.read("match", (i1 - i0) * n)
            ii, jj = np.nonzero(match)
            pairs = [(int(i0 + a), int(b)) for a, b in zip(ii, jj) if b > i0 + a]
            hit = self._verify(prefix, pairs)
            if hit is not None:
                return hit
        return None

    def _verify(self, prefix: tuple[int, ...], tails: list[tuple[int, ...]]) -> Optional[tuple[int, ...]]:
        """The first candidate that fits every training row (screening rows can let a wrong one through)."""
        ctx, xp, prob = self._ctx, self._ctx.backend.xp, self._ctx.problem
        for tail in tails:
            subset = prefix + tail
            self.checked += 1
            rows = self._x.shape[0]
            ctx.trace.read("x", rows * len(subset))
            ctx.trace.read("y", rows)
            ctx.trace.compute(prob.combine_op, rows * (len(subset) - 1))
            ctx.trace.compute("cmp", rows)
            if bool(xp.all(prob.labels(self._x, subset) == self._y)):
                return subset
        return None
