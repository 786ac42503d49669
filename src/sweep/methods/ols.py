"""method=ols: ordinary least squares in one shot, as in the group's harness for sparse sum.

The label of sparse_sum is linear in the bits, so the normal equations (A^T A) w = A^T y with A = [x, 1] give
w = 1 on the secret bits and 0 elsewhere from any full-rank training set; the prediction is the problem's
decision on A w (the nearest integer). The secret found is the k bits of largest |w|.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar, ContextManager

import numpy as np
from threadpoolctl import threadpool_limits

from sweep.config.footprint import Term
from sweep.methods.base import SEEDS_ONLY, Context, MethodBase, Outcome
from sweep.trace.source import Source


@dataclass
class OLS(MethodBase):
    problems: ClassVar[tuple[str, ...]] = ("sparse_sum",)  # a +-1 product or minimum is not linear in the bits
    vectorised: ClassVar[tuple[str, ...]] = SEEDS_ONLY  # batched as several runs in one task
    trace_source: ClassVar[str] = Source.AUTO.value  # tracker.source=method: its hand trace misses reads

    name: str = "ols"

    @classmethod
    def footprint(cls, cfg: Any) -> list[Term]:
        """The design matrix with its column of ones, the Gram matrix and the solver's copy of it."""
        m, c = int(cfg.problem.n_train), int(cfg.problem.n_bits) + 1
        return [Term("normal equations", 8 * (m * c + 2 * c * c), ("problem.n_bits", "problem.n_train"))]

    @classmethod
    def least_work(cls, cfg: Any) -> list[Term]:
        """The Gram matrix (m c^2 multiply-adds) and its LU factorisation (c^3 / 3)."""
        m, c = int(cfg.problem.n_train), int(cfg.problem.n_bits) + 1
        return [Term("normal equations", m * c * c + c**3 / 3, ("problem.n_bits", "problem.n_train"))]

    def solve(self, ctx: Context) -> Outcome:
        be, xp, d, prob = ctx.backend, ctx.backend.xp, ctx.data, ctx.problem
        with ctx.recording(loaded={"x": be.asarray(d.x_train), "y": be.asarray(d.y_train)}) as r:
            trace, x, y = r.trace, r["x"], r["y"]
            m, n = x.shape
            a = xp.concat([x, xp.ones((m, 1), dtype=x.dtype, device=x.device)], axis=1)
            c = n + 1
            trace.write("x", m * n)
            trace.write("y", m)
            trace.read("x", m * n)
            trace.write("A", m * c)
            trace.read("A", m * c)
            with one_blas_thread(be.name == "numpy"):
                gram = a.T @ a
            trace.compute("fma", m * c * c)
            trace.write("gram", c * c)
            trace.read("A", m * c)
            trace.read("y", m)
            rhs = a.T @ y
            trace.compute("fma", m * c)
            trace.write("rhs", c)
            trace.read("gram", c * c)
            trace.read("rhs", c)
            w = xp.linalg.solve(gram, rhs)
            trace.compute("fma", c**3 // 3 + c * c)  # LU factorisation, then the two triangular solves
            trace.write("w", c)
            top = np.argsort(-np.abs(be.to_numpy(w[:n])), kind="stable")[: prob.k_sparse]
            found = tuple(sorted(int(i) for i in top))
        w = r.unwrap(w)

        def evaluate(o: Outcome) -> None:
            for name, (xa, ya) in {"accuracy": (d.x_test, d.y_test), "train_accuracy": (d.x_train, d.y_train)}.items():
                xa, ya = be.asarray(xa), be.asarray(ya)
                out = xa @ w[:n] + w[n]
                setattr(o, name, float(xp.mean(xp.astype(prob.decide(xp, out) == ya, xa.dtype))))

        return Outcome(secret_found=found, evaluate=evaluate)


def one_blas_thread(numpy: bool) -> ContextManager:
    """numpy's `a.T @ a` (OpenBLAS's SYRK) on more than one thread ends the process with a segmentation fault from
    about 16,000 columns at 1,000 rows (numpy#19685: `sweep method=ols problem=sparse_sum problem.n_bits=20000`,
    exit 139, nothing recorded); one thread computes the same exact sums."""
    return threadpool_limits(limits=1, user_api="blas") if numpy else nullcontext()
