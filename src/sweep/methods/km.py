"""method=km: Kushilevitz-Mansour style influence estimation (seed 000/002).

For every bit i, flip it on ``influence_samples`` random inputs and ask the label oracle how often the label
changes; the k most influential bits are the answer. All n flips are one batched array operation, not n small
ones: seed 000 found a per-bit loop 790x slower on a GPU because of kernel-launch overhead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from sweep.methods.base import Context, Outcome, subset_accuracy


@dataclass
class KM:
    # any label oracle; AND's influence is 2^-(k-1), so it needs influence_samples >> 2^(k-1)
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity", "sparse_and", "sparse_sum")

    name: str = "km"
    influence_samples: int = 5

    def solve(self, ctx: Context) -> Outcome:
        be, xp, d, trace, prob = ctx.backend, ctx.backend.xp, ctx.data, ctx.trace, ctx.problem
        n, m, k = prob.n_bits, self.influence_samples, prob.k_sparse
        # PCG64: seeding a legacy RandomState costs ~0.25 ms here, most of a KM solve at n=20
        rng = np.random.default_rng(prob.seed + 2)
        X = be.asarray(1.0 - 2.0 * rng.integers(0, 2, size=(m, n)))
        trace.write("X", m * n)
        flip = be.asarray(1.0 - 2.0 * np.eye(n))  # row i flips bit i
        trace.read("X", m * n)
        Xf = X[None, :, :] * flip[:, None, :]  # (n, m, n)
        trace.write("X_flipped", n * m * n)
        y0 = prob.labels(X, d.secret)  # oracle queries
        trace.write("y0", m)
        trace.read("X_flipped", n * m * n)
        yf = prob.labels(Xf, d.secret)
        trace.write("y_flipped", n * m)
        trace.read("y_flipped", n * m)
        trace.read("y0", m)
        influence = xp.mean(xp.astype(yf != y0[None, :], X.dtype), axis=1)
        trace.write("influence", n)
        trace.read("influence", n)
        infl = be.to_numpy(influence)
        top = np.argsort(-infl, kind="stable")[:k]
        found = tuple(sorted(int(i) for i in top))
        return Outcome(
            accuracy=subset_accuracy(prob, found, d.x_test, d.y_test),
            train_accuracy=subset_accuracy(prob, found, d.x_train, d.y_train),
            secret_found=found,
            extra={"oracle_queries": float(m * (n + 1))},
        )
