"""method=km: Kushilevitz-Mansour style influence estimation (seed 000/002).

For every bit i, flip it on ``influence_samples`` random inputs and ask the label oracle how often the label
changes; the k most influential bits are the answer. The random inputs are the first ``influence_samples``
training inputs: uniform +-1 vectors like any fresh draw, and no generator to seed (seeding one cost most of
a KM solve at n=20). All n flips are one batched array operation, not n small ones: seed 000 found a per-bit
loop 790x slower on a GPU because of kernel-launch overhead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from omegaconf import DictConfig

from sweep.config.fields import Rule, positive_int
from sweep.config.footprint import Term
from sweep.errors import ConfigError
from sweep.methods.base import SEEDS_ONLY, Context, MethodBase, Outcome, subset_outcome
from sweep.trace.source import Source


@dataclass
class KM(MethodBase):
    # any label oracle; AND's influence is 2^-(k-1), so it needs influence_samples >> 2^(k-1)
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity", "sparse_and", "sparse_sum")
    vectorised: ClassVar[tuple[str, ...]] = SEEDS_ONLY  # batched as several runs in one task
    trace_source: ClassVar[str] = Source.AUTO.value  # tracker.source=method: its hand trace misses reads
    field_rules: ClassVar[tuple[Rule, ...]] = (Rule("method.influence_samples", "an integer >= 1", positive_int),)

    name: str = "km"
    influence_samples: int = 5

    @classmethod
    def footprint(cls, cfg: Any) -> list[Term]:
        """Every query at once: (n + 1) x influence_samples x n floats, and the (n + 1) x n sign pattern."""
        n, m = int(cfg.problem.n_bits), int(cfg.method.influence_samples)
        return [Term("queries", 8 * (n + 1) * n * (m + 1), ("problem.n_bits", "method.influence_samples"))]

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:

        m, n_train = cfg.method.influence_samples, cfg.problem.n_train
        if not 1 <= m <= n_train:
            raise ConfigError(
                f"method=km takes its method.influence_samples={m} random inputs from the training "
                f"set: it must be between 1 and problem.n_train={n_train}"
            )

    def solve(self, ctx: Context) -> Outcome:
        be, d, prob = ctx.backend, ctx.data, ctx.problem
        n, m, k = prob.n_bits, self.influence_samples, prob.k_sparse
        with ctx.recording(loaded={"X": be.asarray(d.x_train[:m])}) as r:
            trace, X = r.trace, r["X"]
            trace.write("X", m * n)
            # every query in one array, one oracle call: row 0 of the sign pattern keeps X, row i + 1 flips bit i
            signs = be.asarray(1.0 - 2.0 * np.eye(n + 1, n, k=-1))
            trace.read("X", m * n)
            queries = X * signs[:, None, :]  # (n + 1, m, n), built on the device
            trace.compute("mul", (n + 1) * m * n)
            trace.write("X_flipped", n * m * n)
            trace.read("X", m * n)
            trace.read("X_flipped", n * m * n)
            y = prob.labels(queries, d.secret)  # the oracle: (n + 1, m) labels
            trace.compute(prob.combine_op, (n + 1) * m * (k - 1))
            trace.write("y0", m)
            trace.write("y_flipped", n * m)
            trace.read("y_flipped", n * m)
            trace.read("y0", m)
            # influence of bit i: how often flipping it changes the label (a count: the mean's order, no division)
            changed = (y[1:] != y[0]).sum(1)
            trace.compute("cmp", n * m)
            trace.compute("add", n * m)
            trace.write("influence", n)
            trace.read("influence", n)
            top = np.argsort(-be.to_numpy(changed), kind="stable")[:k]
            found = tuple(sorted(top.tolist()))
        return subset_outcome(prob, d, found, oracle_queries=float(m * (n + 1)))
