"""method=fourier: exhaustive Walsh correlation over the subsets that reveal the secret (seed 002).

For every subset S of size d the empirical Fourier coefficient mean(y * prod_{i in S} x_i) is computed; the
secret is the union of the k/d subsets of largest magnitude. d is the problem's ``fourier_degree``: k for
parity and AND (the whole secret is one subset: for parity its coefficient is 1 and ~1/sqrt(m) elsewhere, for
AND 2/2^k and 0 for every other k-subset), 1 for a sum (linear in the bits: each secret bit's degree-one
coefficient is 1, the others ~1/sqrt(m)). C(n, d) subsets are scored in chunks of ``chunk``, each one batched
array operation (no per-subset loop); configs with C(n, d) > max_subsets are refused before the job starts.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from hydra.utils import get_class
from omegaconf import DictConfig

from sweep.config.fields import Rule, positive_int
from sweep.config.footprint import Term, item_bytes
from sweep.errors import ConfigError
from sweep.methods.base import SEEDS_ONLY, Context, MethodBase, Outcome, subset_outcome
from sweep.trace.source import Source
from sweep.trace.trace import Trace


@dataclass
class Fourier(MethodBase):
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity", "sparse_and", "sparse_sum")
    vectorised: ClassVar[tuple[str, ...]] = SEEDS_ONLY  # batched as several runs in one task
    trace_source: ClassVar[str] = Source.AUTO.value  # tracker.source=method: its hand trace misses reads
    field_rules: ClassVar[tuple[Rule, ...]] = (
        Rule("method.max_subsets", "an integer >= 1", positive_int),
        Rule("method.chunk", "an integer >= 1", positive_int),
    )

    name: str = "fourier"
    max_subsets: int = 2_000_000  # refuse (at config time) when C(n_bits, k_sparse) exceeds this
    chunk: int = 2048  # subsets correlated per batched operation (bounds memory)

    @classmethod
    def footprint(cls, cfg: Any) -> list[Term]:
        """A chunk of subsets at once: its characters over the training rows, the column gathered and their product
        (three arrays of rows x chunk floats), and the chunk's index tuples (a Python tuple and a row of ints each).
        The chunk is `method.chunk` or every subset, whichever is fewer: `method.chunk=1000000000` at n_bits=200
        asked for 9.8 GB in one array once the job ran."""
        d = get_class(cfg.problem._target_).fourier_degree or cfg.problem.k_sparse
        chunk = min(int(cfg.method.chunk), math.comb(cfg.problem.n_bits, d))
        per_subset = 3 * item_bytes(cfg) * int(cfg.problem.n_train) + 72 + 16 * d
        return [Term("a chunk of subsets", float(chunk) * per_subset, ("method.chunk", "problem.n_train"))]

    @classmethod
    def least_work(cls, cfg: Any) -> list[Term]:
        """Every subset scored: d products and a multiply-add a training row (a max_subsets raised past its
        default lets C(n, d) grow past any wait)."""
        d = get_class(cfg.problem._target_).fourier_degree or cfg.problem.k_sparse
        count = min(math.comb(cfg.problem.n_bits, d), 10**100)
        fields = ("problem.n_bits", "problem.k_sparse", "problem.n_train")
        return [Term("every subset scored", float(count) * (d + 1) * cfg.problem.n_train, fields)]

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:

        n, k, limit = cfg.problem.n_bits, cfg.problem.k_sparse, cfg.method.max_subsets
        d = get_class(cfg.problem._target_).fourier_degree or k
        count = math.comb(n, d)
        if count > limit:
            raise ConfigError(
                f"method=fourier would score C(n_bits={n}, {d}) = {count:,} subsets, more than "
                f"method.max_subsets={limit:,}: raise method.max_subsets (memory and time grow with "
                f"it) or use a method that does not enumerate subsets (gf2, km, smt)"
            )

    def solve(self, ctx: Context) -> Outcome:
        be, d, prob = ctx.backend, ctx.data, ctx.problem
        k = prob.k_sparse
        degree = prob.fourier_degree or k
        keep = k // degree  # the secret is the union of this many subsets of size `degree`
        with ctx.recording(loaded={"x": be.asarray(d.x_train), "y": be.asarray(d.y_train)}) as r:
            top, scored = self.scan(ctx, r.trace, r["x"], r["y"], degree, keep)
        found = tuple(sorted({b for _, subset in top for b in subset}))
        return subset_outcome(prob, d, found, subsets_scored=float(scored), top_correlation=top[0][0] if top else -1.0)

    def scan(self, ctx: Context, trace: Trace, x, y, degree: int, keep: int) -> tuple[list, int]:
        """Every subset of size ``degree`` scored in chunks; the best ``keep`` (|coefficient|, subset) and how many
        subsets were scored. ``trace`` takes the hand-placed calls (sweep.trace.source)."""
        be, xp, n = ctx.backend, ctx.backend.xp, ctx.problem.n_bits
        m = x.shape[0]
        trace.write("x", m * n)
        trace.write("y", m)
        trace.read("y", m)
        y_centered = y - xp.mean(y)  # AND's labels are not balanced: drop the constant (empty-set) term
        trace.compute("add", 2 * m)
        trace.write("y_centered", m)
        top: list[tuple[float, tuple[int, ...]]] = []  # the best `keep` (|coefficient|, subset) so far
        scored = 0
        subsets = itertools.combinations(range(n), degree)
        # at most every subset, as the footprint counts it (islice takes no stop past sys.maxsize: method.chunk=1e30
        # failed the run)
        chunk = min(self.chunk, math.comb(n, degree))
        while True:
            idx = np.array(list(itertools.islice(subsets, chunk)), dtype=np.int64).reshape(-1, degree)
            c = idx.shape[0]
            if c == 0:
                break
            cols = be.index(idx)
            chi = x[:, cols[:, 0]]
            for j in range(1, degree):  # one factor per subset bit, each a batched product over the chunk
                chi = chi * x[:, cols[:, j]]
            trace.read("x", m * c * degree)
            trace.compute("mul", m * c * (degree - 1))
            trace.write("chi", m * c)
            trace.read("chi", m * c)
            trace.read("y_centered", m)
            corr = xp.abs(y_centered @ chi) / m
            trace.compute("fma", m * c)
            trace.compute("mul", c)
            trace.write("corr", c)
            best = xp.argsort(corr, descending=True, stable=True)[:keep]
            trace.read("corr", c)
            trace.compute("cmp", c * max(1, keep))
            values, picks = be.to_numpy(corr[best]), be.to_numpy(best)
            # stable: on a tie the earlier subset wins, as in a single pass over all subsets
            top = sorted(
                top + [(float(v), tuple(int(b) for b in idx[i])) for v, i in zip(values, picks)], key=lambda t: -t[0]
            )[:keep]
            scored += c
        return top, scored
