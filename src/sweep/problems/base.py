"""A problem draws a data set (host numpy arrays) and answers label queries (KM needs an oracle).

Every problem here is "n random +-1 bits, k secret indices, a label from those bits" where the label is a
fold of the secret bits under an associative ``combine`` (product, minimum, sum). Methods that search subsets
(smt) use ``combine`` to extend a partial subset by one bit and ``feasible`` to prune partial subsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sweep.config.fields import SEED_MAX, Rule, nonneg_int, positive_int
from sweep.config.footprint import Term

SEED_RULE = Rule(
    "problem.seed",
    f"an integer with 0 <= seed <= {SEED_MAX} (numpy's RandomState takes seed and seed + 1)",
    lambda v, c: nonneg_int(v) and v <= SEED_MAX,
)


class ProblemBase:
    """What a problem is: the class a conf/problem/ option's `_target_` names. A problem is a dataclass subclass of
    this (its fields are the option's, sweep.config.schema) that draws its data in `generate`; the rest has its
    default here. Methods say which problems they take by the problems' `name` (MethodBase.problems)."""

    field_rules: ClassVar[tuple[Rule, ...]] = ()  # its fields' value rules (sweep.config.fields)

    name: str  # the option's name (a dataclass field of the subclass)

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """What a field's rule cannot say (sweep.config.check, stage 3): raise ConfigError naming the field."""

    def generate(self) -> Any:
        """The data a method learns from (host arrays), drawn from the problem's seed."""
        raise NotImplementedError


@dataclass
class Dataset:
    x_train: np.ndarray  # (n_train, n_bits), entries +-1.0
    y_train: np.ndarray  # (n_train,)
    x_test: np.ndarray
    y_test: np.ndarray
    secret: tuple[int, ...]


@dataclass
class Problem(ProblemBase):
    """Base for the sparse-bit problems: n random +-1 bits, k secret indices, a label from those bits."""

    # What a learner needs to know about the labels (read by methods, so no method tests problem names):
    # loss: what a real-valued predictor is trained on (hinge for +-1 labels; squared for integer labels);
    # fourier_degree: the size of the subsets whose Walsh coefficients reveal the secret (None: k_sparse,
    # the whole secret at once; 1: each secret bit on its own, as for a sum).
    loss: ClassVar[str] = "hinge"
    fourier_degree: ClassVar[int | None] = None
    field_rules: ClassVar[tuple[Rule, ...]] = (
        Rule("problem.n_bits", "an integer >= 1", positive_int),
        Rule(
            "problem.k_sparse",
            "an integer with 1 <= k_sparse <= problem.n_bits",
            lambda v, c: positive_int(v) and v <= c.problem.n_bits,
        ),
        Rule("problem.n_train", "an integer >= 1", positive_int),
        Rule("problem.n_test", "an integer >= 1", positive_int),
        SEED_RULE,
    )

    name: str = "problem"
    n_bits: int = 20
    k_sparse: int = 3
    n_train: int = 1000
    n_test: int = 200
    seed: int = 42
    combine_op: ClassVar[str] = "mul"  # the operation kind of one combine per element (Trace.compute)

    @classmethod
    def footprint(cls, cfg: Any) -> list[Term]:
        """x_train and x_test as float64 (n_bits each), twice (numpy draws through a temporary of the same size)."""
        rows = int(cfg.select("problem.n_train", 0)) + int(cfg.select("problem.n_test", 0))
        fields = ("problem.n_bits", "problem.n_train", "problem.n_test")
        return [Term("data", 2 * 8 * rows * int(cfg.select("problem.n_bits", 0)), fields)]

    def combine(self, a, b):
        """Fold two partial labels (or a partial label and a bit) into one; works on numpy and torch."""
        raise NotImplementedError

    def labels(self, x, secret):
        """The label of every row of x (..., n_bits) for the given secret; a fold over the k secret bits."""
        y = x[..., secret[0]]
        for i in secret[1:]:  # k bits, not n: the loop is over the (small) secret
            y = self.combine(y, x[..., i])
        return y

    def decide(self, xp, out):
        """The label a real-valued prediction stands for (binary problems: its sign)."""
        return xp.where(out >= 0, 1.0, -1.0)

    def feasible(self, xp, partial, y, remaining: int) -> bool:
        """Can some ``remaining`` more bits turn the partial fold (rows,) into the labels y? (smt pruning)"""
        return True

    def generate(self) -> Dataset:
        """Draw secret and data the way the group's harness does (docs/traces.md, "Data drawn like the group's
        harness")."""
        rng = np.random.RandomState(self.seed)
        secret = tuple(int(i) for i in sorted(rng.choice(self.n_bits, self.k_sparse, replace=False)))
        x_train = rng.choice([-1.0, 1.0], size=(self.n_train, self.n_bits))
        x_test = rng.choice([-1.0, 1.0], size=(self.n_test, self.n_bits))
        return Dataset(x_train, self.labels(x_train, secret), x_test, self.labels(x_test, secret), secret)
