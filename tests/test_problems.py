"""Problems: labels, the harness-compatible draw, and the folds/pruning that smt relies on."""

from __future__ import annotations

import numpy as np
import pytest

from sweep.problems.sparse_and import SparseAnd
from sweep.problems.sparse_parity import SparseParity
from sweep.problems.sparse_sum import SparseSum

X = np.array([[1.0, -1.0, 1.0, 1.0], [-1.0, -1.0, 1.0, -1.0], [1.0, 1.0, 1.0, -1.0]])


@pytest.mark.parametrize(
    "problem, want",
    [
        (SparseParity(), [-1.0, 1.0, 1.0]),  # product of bits 0, 1, 2
        (SparseAnd(), [-1.0, -1.0, 1.0]),  # +1 iff all of bits 0, 1, 2 are +1
        (SparseSum(), [1.0, -1.0, 3.0]),  # sum of bits 0, 1, 2
    ],
)
def test_labels(problem, want):
    np.testing.assert_array_equal(problem.labels(X, (0, 1, 2)), want)


@pytest.mark.parametrize("cls", [SparseParity, SparseAnd, SparseSum])
def test_same_seed_same_secret_and_inputs_for_every_problem(cls):
    """Only the label differs between problems: secret and inputs are the harness's draw."""
    ref, d = SparseParity(seed=7).generate(), cls(seed=7).generate()
    assert d.secret == ref.secret
    np.testing.assert_array_equal(d.x_train, ref.x_train)
    np.testing.assert_array_equal(d.y_test, cls(seed=7).labels(d.x_test, d.secret))


def test_sum_accuracy_is_on_the_rounded_prediction():
    import array_api_compat.numpy as xp

    np.testing.assert_array_equal(SparseSum().decide(xp, np.array([0.6, -2.7, 1.2])), [1.0, -3.0, 1.0])


def test_pruning_rules():
    import array_api_compat.numpy as xp

    y = np.array([1.0, -1.0])
    assert not SparseAnd().feasible(xp, np.array([-1.0, -1.0]), y, 2)  # a -1 row can never become +1
    assert SparseAnd().feasible(xp, np.array([1.0, -1.0]), y, 2)
    assert not SparseSum().feasible(xp, np.array([-1.0, 0.0]), np.array([3.0, 0.0]), 2)  # 4 away, 2 bits left
    assert SparseSum().feasible(xp, np.array([1.0, 0.0]), np.array([3.0, 0.0]), 2)
