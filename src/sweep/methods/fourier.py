"""method=fourier: exhaustive Walsh correlation over all k-subsets (seed 002).

For every k-subset S the empirical Fourier coefficient mean(y * prod_{i in S} x_i) is computed; the subset of
largest magnitude is the answer. For parity it is 1 on the secret and ~1/sqrt(m) elsewhere; for AND the
secret's top coefficient is 2/2^k and every other k-subset's is 0. C(n, k) subsets are scored in chunks of
``chunk``, each one batched array operation (no per-subset loop); configs with C(n, k) > max_subsets are
refused before the job starts.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from omegaconf import DictConfig

from sweep.methods.base import Context, Outcome, subset_outcome


@dataclass
class Fourier:
    # sum: a k-subset's parity is uncorrelated with a sum of k >= 2 bits
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity", "sparse_and")

    name: str = "fourier"
    max_subsets: int = 2_000_000
    chunk: int = 2048

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        from sweep.validate import ConfigError

        n, k, limit = cfg.problem.n_bits, cfg.problem.k_sparse, cfg.method.max_subsets
        count = math.comb(n, k)
        if count > limit:
            raise ConfigError(f"method=fourier would score C(n_bits={n}, k_sparse={k}) = {count:,} subsets, more than "
                              f"method.max_subsets={limit:,}: raise method.max_subsets (memory and time grow with "
                              f"it) or use a method that does not enumerate subsets (gf2, km, smt)")

    def solve(self, ctx: Context) -> Outcome:
        be, xp, d, trace, prob = ctx.backend, ctx.backend.xp, ctx.data, ctx.trace, ctx.problem
        n, k = prob.n_bits, prob.k_sparse
        x, y = be.asarray(d.x_train), be.asarray(d.y_train)
        m = x.shape[0]
        y_centered = y - xp.mean(y)  # AND's labels are not balanced: drop the constant (empty-set) term
        trace.write("x", m * n)
        trace.write("y", m)
        best, best_subset, scored = -1.0, (), 0
        subsets = itertools.combinations(range(n), k)
        while True:
            idx = np.array(list(itertools.islice(subsets, self.chunk)), dtype=np.int64).reshape(-1, k)
            if idx.shape[0] == 0:
                break
            cols = be.index(idx)
            chi = x[:, cols[:, 0]]
            for j in range(1, k):  # k factors (the subset size), each a batched product over the chunk
                chi = chi * x[:, cols[:, j]]
            trace.read("x", m * idx.shape[0] * k)
            trace.write("chi", m * idx.shape[0])
            trace.read("chi", m * idx.shape[0])
            trace.read("y", m)
            corr = xp.abs(y_centered @ chi) / m
            trace.write("corr", idx.shape[0])
            i = int(xp.argmax(corr))
            trace.read("corr", idx.shape[0])
            value = float(corr[i])
            if value > best:
                best, best_subset = value, tuple(int(c) for c in idx[i])
            scored += idx.shape[0]
        return subset_outcome(prob, d, best_subset, subsets_scored=float(scored), top_correlation=best)
