"""method=gf2: Gaussian elimination over GF(2) (seed 000/002).

A +-1 input bit x maps to a = (1 - x)/2 and the parity label y to b = (1 - y)/2, so b = a . s (mod 2) where
s is the secret's indicator vector; k odd or even makes no difference. Elimination starts on n_bits + 1
samples; when they are rank-deficient (about 1 seed in 5 at n = 20) the solution is not unique and a naive
solver returns a wrong subset that still fits those rows, so more rows are added until the rank is full.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from sweep.methods.base import Context, Outcome, subset_accuracy
from sweep.trackers.trace import Trace


def eliminate(xp, A, trace: Trace):
    """Reduce the augmented 0/1 matrix A (m, n+1) to reduced row echelon form over GF(2).

    Returns (A, pivot_cols). Each pivot is one vectorised XOR over all rows, so the work per pivot is a
    handful of array operations whatever the backend (no per-row Python loop).
    """
    m, n1 = A.shape
    pivots: list[int] = []
    r = 0
    for c in range(n1 - 1):
        if r == m:
            break
        trace.read("A_col", m)
        col = A[r:, c]
        if not bool(xp.any(col == 1)):
            continue
        p = r + int(xp.argmax(col))
        if p != r:  # swap rows p and r
            rows = A[[r, p], :]
            A[r, :] = rows[1, :]
            A[p, :] = rows[0, :]
            trace.write("A", 2 * n1)
        pivot = A[r, :]
        trace.read("pivot_row", n1)
        hit = A[:, c] == 1
        hit[r] = False
        trace.read("A", m * n1)
        A = xp.where(hit[:, None], A ^ pivot[None, :], A)
        trace.write("A", m * n1)
        pivots.append(c)
        r += 1
    return A, pivots


@dataclass
class GF2:
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity",)  # only parity is linear over GF(2)

    name: str = "gf2"
    max_rows: int = 0  # 0: grow up to the whole training set

    def solve(self, ctx: Context) -> Outcome:
        be, xp, d, trace = ctx.backend, ctx.backend.xp, ctx.data, ctx.trace
        n = ctx.problem.n_bits
        limit = self.max_rows or d.x_train.shape[0]
        m = min(n + 1, limit)
        a_all = be.index((d.x_train < 0).astype(np.int64))
        b_all = be.index((d.y_train < 0).astype(np.int64))
        while True:
            A = xp.concat([a_all[:m], b_all[:m, None]], axis=1)
            trace.write("A", m * (n + 1))
            A, pivots = eliminate(xp, A, trace)
            if len(pivots) == n or m >= limit:
                break
            m = min(2 * m, limit)  # rank-deficient: the answer is not unique yet, take more rows
        A_np = be.to_numpy(A)
        s = np.zeros(n, dtype=np.int64)
        for row, c in enumerate(pivots):
            s[c] = A_np[row, n]
        trace.read("A", m * (n + 1))
        found = tuple(int(i) for i in np.flatnonzero(s))
        return Outcome(
            accuracy=subset_accuracy(ctx.problem, found, d.x_test, d.y_test),
            train_accuracy=subset_accuracy(ctx.problem, found, d.x_train, d.y_train),
            secret_found=found,
            extra={"rows_used": float(m), "rank": float(len(pivots))},
        )
