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
from typing import Any, ClassVar, Optional

import numpy as np

from sweep.config.fields import Rule, nonneg_int, positive_int
from sweep.config.footprint import Term, item_bytes
from sweep.methods.base import SEEDS_ONLY, Context, MethodBase, Outcome, subset_outcome
from sweep.trace.source import Source


@dataclass
class SMT(MethodBase):
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity", "sparse_and", "sparse_sum")
    vectorised: ClassVar[tuple[str, ...]] = SEEDS_ONLY  # batched as several runs in one task
    trace_source: ClassVar[str] = Source.AUTO.value  # tracker.source=method: its hand trace misses reads
    field_rules: ClassVar[tuple[Rule, ...]] = (
        Rule("method.screen_rows", "an integer >= 0 (0: 2 log2 C(n_bits, k_sparse) + 16)", nonneg_int),
        Rule("method.pair_block", "an integer >= 1", positive_int),
    )

    name: str = "smt"
    screen_rows: int = 0  # 0: 2 log2 C(n, k) + 16, enough that a wrong subset rarely survives screening
    pair_block: int = 4_000_000  # elements per batched pair extension (bounds memory at large n)

    @staticmethod
    def screening(n: int, k: int, rows: int, screen_rows: int) -> int:
        """The screening rows: `screen_rows`, or 2 log2 C(n, k) + 16; at most the training rows."""
        return min(rows, screen_rows or int(2 * math.log2(max(math.comb(n, k), 2))) + 16)

    @classmethod
    def footprint(cls, cfg: Any) -> list[Term]:
        """One batched pair step: the screening rows x the first indices of a block x every second index, as
        floats, and the same count of booleans compared with the labels. A block holds `method.pair_block`
        elements, but never fewer than one first index nor more than all of them: `method.pair_block` raised
        past m x n x n makes the step every pair at once (2.7 GB at n_bits=2000, 17 GB at 5000)."""
        n, k = int(cfg.problem.n_bits), int(cfg.problem.k_sparse)
        m = cls.screening(n, k, int(cfg.problem.n_train), int(cfg.select("method.screen_rows", 0) or 0))
        firsts = min(max(1, int(cfg.method.pair_block) // max(m * n, 1)), max(n - 1, 1)) if k >= 2 else 1
        fields = ("method.pair_block", "problem.n_bits", "method.screen_rows")
        return [Term("a pair step", float(m) * firsts * n * (item_bytes(cfg) + 1), fields)]

    @classmethod
    def least_work(cls, cfg: Any) -> list[Term]:
        """The search a random secret costs on average: half of every (k-2)-prefix's batched pair step (m x n x n/2
        comparisons on the screening rows). A prefix pruned early costs less (AND and sum may prune; parity never
        does)."""
        n, k = int(cfg.problem.n_bits), int(cfg.problem.k_sparse)
        m = cls.screening(n, k, int(cfg.problem.n_train), int(cfg.select("method.screen_rows", 0) or 0))
        pair_step = m * n * (n if k >= 2 else 1) / 2
        prefixes = min(math.comb(n, max(k - 2, 0)), 10**100)  # a float past that would overflow
        return [Term("search", float(prefixes) * pair_step / 2, ("problem.n_bits", "problem.k_sparse"))]

    def solve(self, ctx: Context) -> Outcome:
        be, d, prob = ctx.backend, ctx.data, ctx.problem
        n, k = prob.n_bits, prob.k_sparse
        m = self.screening(n, k, d.x_train.shape[0], self.screen_rows)
        self._ctx, self._n, self._k = ctx, n, k
        self.nodes = self.checked = 0
        with ctx.recording(loaded={"x": be.asarray(d.x_train), "y": be.asarray(d.y_train)}) as r:
            self._trace, self._x, self._y = r.trace, r["x"], r["y"]
            self._xs, self._ys = self._x[:m], self._y[:m]  # the screening rows
            self._trace.write("x", self._x.shape[0] * n)
            self._trace.write("y", self._y.shape[0])
            self._trace.read("x", m * n)  # the screening rows are a copy of the first m rows
            self._trace.read("y", m)
            self._trace.write("x_screen", m * n)
            self._trace.write("y_screen", m)
            found = self._search((), None) or ()
        self._x = self._y = self._xs = self._ys = None  # the data belongs to the run, not to the method object
        return subset_outcome(
            prob, d, found, nodes=float(self.nodes), candidates_checked=float(self.checked), screen_rows=float(m)
        )

    def _search(self, prefix: tuple[int, ...], partial) -> Optional[tuple[int, ...]]:
        """Backtrack over prefixes of length k - 2; each one ends in a batched pair step."""
        xp, prob, n, k = self._ctx.backend.xp, self._ctx.problem, self._n, self._k
        self.nodes += 1
        if partial is not None:
            self._trace.read("partial", partial.shape[0])
            self._trace.read("y_screen", partial.shape[0])
            self._trace.compute("cmp", partial.shape[0])
            if not prob.feasible(xp, partial, self._ys, k - len(prefix)):
                return None  # pruned: no completion of this prefix can fit the screening rows
        if len(prefix) >= k - 2:
            return self._last_levels(prefix, partial)
        start = prefix[-1] + 1 if prefix else 0
        for i in range(start, n - (k - len(prefix)) + 1):
            col = self._xs[:, i]
            self._trace.read("x_screen", col.shape[0])
            if partial is None:
                nxt = col
            else:
                self._trace.read("partial", col.shape[0])
                nxt = prob.combine(partial, col)
                self._trace.compute(prob.combine_op, col.shape[0])
            self._trace.write("partial", col.shape[0])
            hit = self._search(prefix + (i,), nxt)
            if hit is not None:
                return hit
        return None

    def _last_levels(self, prefix: tuple[int, ...], partial) -> Optional[tuple[int, ...]]:
        """All completions of the prefix by its last 1 or 2 indices, matched against the labels at once."""
        be, xp, prob, n = self._ctx.backend, self._ctx.backend.xp, self._ctx.problem, self._n
        xs, ys = self._xs, self._ys
        m, left, start = xs.shape[0], self._k - len(prefix), (prefix[-1] + 1 if prefix else 0)
        if left == 1:
            ext = xs if partial is None else prob.combine(partial[:, None], xs)  # (m, n): prefix + each bit
            self._trace.read("x_screen", m * n)
            self._trace.read("y_screen", m)
            if partial is not None:
                self._trace.read("partial", m)
                self._trace.compute(prob.combine_op, m * n)
            match = xp.all(ext == ys[:, None], axis=0)
            self._trace.compute("cmp", m * n)
            self._trace.write("match", n)
            self._trace.read("match", n)
            pairs = [(int(j),) for j in np.flatnonzero(be.to_numpy(match)) if j >= start]
            return self._verify(prefix, pairs)
        block = max(1, self.pair_block // (m * n))
        for i0 in range(start, n - 1, block):
            i1 = min(i0 + block, n - 1)
            first = xs[:, i0:i1] if partial is None else prob.combine(partial[:, None], xs[:, i0:i1])
            ext = prob.combine(first[:, :, None], xs[:, None, :])  # (m, i, j): prefix + bits i and j
            self._trace.read("x_screen", m * (i1 - i0 + n))
            if partial is not None:
                self._trace.read("partial", m)
            self._trace.compute(prob.combine_op, m * (i1 - i0) * (n + (partial is not None)))
            self._trace.write("ext", m * (i1 - i0) * n)
            self._trace.read("ext", m * (i1 - i0) * n)
            self._trace.read("y_screen", m)
            match = be.to_numpy(xp.all(ext == ys[:, None, None], axis=0))
            self._trace.compute("cmp", m * (i1 - i0) * n)
            self._trace.write("match", (i1 - i0) * n)
            self._trace.read("match", (i1 - i0) * n)
            ii, jj = np.nonzero(match)
            pairs = [(int(i0 + a), int(b)) for a, b in zip(ii, jj) if b > i0 + a]
            hit = self._verify(prefix, pairs)
            if hit is not None:
                return hit
        return None

    def _verify(self, prefix: tuple[int, ...], tails: list[tuple[int, ...]]) -> Optional[tuple[int, ...]]:
        """The first candidate that fits every training row (screening rows can let a wrong one through)."""
        xp, prob = self._ctx.backend.xp, self._ctx.problem
        for tail in tails:
            subset = prefix + tail
            self.checked += 1
            rows = self._x.shape[0]
            self._trace.read("x", rows * len(subset))
            self._trace.read("y", rows)
            self._trace.compute(prob.combine_op, rows * (len(subset) - 1))
            self._trace.compute("cmp", rows)
            if bool(xp.all(prob.labels(self._x, subset) == self._y)):
                return subset
        return None
