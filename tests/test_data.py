"""sparse_parity data: +-1 inputs, label = product of the secret bits, drawn like the group's harness."""

import numpy as np
import pytest

from sweep.methods.sgd import init_params
from sweep.problems.sparse_parity import SparseParity


def test_draws_match_the_group_harness():
    p = SparseParity(n_bits=20, k_sparse=3, n_train=50, n_test=10, seed=42)
    d = p.generate()
    rng = np.random.RandomState(42)
    secret = sorted(rng.choice(20, 3, replace=False))
    x_train = rng.choice([-1.0, 1.0], size=(50, 20))
    x_test = rng.choice([-1.0, 1.0], size=(10, 20))
    assert list(d.secret) == [int(s) for s in secret]
    np.testing.assert_array_equal(d.x_train, x_train)
    np.testing.assert_array_equal(d.x_test, x_test)
    np.testing.assert_array_equal(d.y_train, np.prod(x_train[:, secret], axis=1))


def test_labels_are_parity_of_secret_bits():
    d = SparseParity(n_bits=12, k_sparse=4, n_train=300, n_test=100, seed=3).generate()
    assert set(np.unique(d.x_train)) == {-1.0, 1.0}
    assert d.x_train.shape == (300, 12) and d.x_test.shape == (100, 12)
    assert len(set(d.secret)) == 4 and all(0 <= s < 12 for s in d.secret)
    flips = (d.x_train[:, list(d.secret)] < 0).sum(axis=1)
    np.testing.assert_array_equal(d.y_train, np.where(flips % 2 == 0, 1.0, -1.0))


@pytest.mark.parametrize("seed", [0, 42, 99])
def test_seed_determines_secret_and_data(seed):
    a, b = SparseParity(seed=seed).generate(), SparseParity(seed=seed).generate()
    assert a.secret == b.secret
    np.testing.assert_array_equal(a.x_train, b.x_train)


def test_initial_weights_follow_the_harness():
    p, _ = init_params(20, 200, 42)
    rng = np.random.RandomState(43)
    np.testing.assert_allclose(p["W1"], rng.randn(200, 20) * np.sqrt(2 / 20))
    np.testing.assert_allclose(p["W2"], rng.randn(1, 200) * np.sqrt(2 / 200))
    assert not p["b1"].any() and not p["b2"].any()
