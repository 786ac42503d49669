"""device.rng=counter (sweep.methods.counter_rng): draws that depend on (seed, draw number) alone, the same on
numpy and torch, permutations that are permutations, normals that are standard normal."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sweep.backend import Backend
from sweep.methods import counter_rng
from sweep.methods.counter_rng import CounterRNG, method_rng, mix32
from tests.conftest import compose

NP, TORCH = Backend("numpy", rng="counter"), Backend("torch", "cpu", rng="counter")


def test_the_mixer_is_lowbias32_on_both_libraries():
    """Wellons' published lowbias32 computed with uint32 wrap-around arithmetic, against the overflow-free form."""
    x = np.array([0, 1, 2, 12345, 0x7FFFFFFF, 0xFFFFFFFF], dtype=np.uint64)
    ref = x ^ (x >> 16)
    ref = (ref * 0x7FEB352D) & 0xFFFFFFFF
    ref ^= ref >> 15
    ref = (ref * 0x846CA68B) & 0xFFFFFFFF
    ref ^= ref >> 16
    assert mix32(x.astype(np.int64)).tolist() == ref.tolist()
    assert mix32(torch.tensor(x.astype(np.int64))).tolist() == ref.tolist()
    assert len(set(mix32(np.arange(1 << 16, dtype=np.int64)).tolist())) == 1 << 16  # a bijection: no collisions


def test_a_draw_depends_on_its_seed_and_number_alone():
    seeds, draws = [5, 6, 5, 5], [0, 0, 1, 0]
    p = counter_rng.permutations(NP, seeds, draws, 1000)
    assert (np.sort(p, axis=1) == np.arange(1000)).all()  # each row a permutation
    assert (p[0] == p[3]).all() and (p[0] != p[1]).any() and (p[0] != p[2]).any()
    assert (counter_rng.permutations(NP, [5], [1], 1000)[0] == p[2]).all()  # alone or among others, the same
    assert (counter_rng.permutations(TORCH, seeds, draws, 1000).numpy() == p).all()  # numpy and torch alike
    z = counter_rng.normals(NP, [2**32 - 2, 0], [3, 3], 7)
    np.testing.assert_allclose(counter_rng.normals(TORCH, [2**32 - 2, 0], [3, 3], 7).numpy(), z, rtol=1e-12)


def test_normals_are_standard_and_uncorrelated():
    z = counter_rng.normals(NP, np.arange(20), np.zeros(20, dtype=int), 20_000).ravel()
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert abs(np.corrcoef(z[:-1], z[1:])[0, 1]) < 0.01
    assert abs((z > 1.96).mean() - 0.025) < 0.002  # the tail of N(0, 1)


def test_a_run_draws_in_sequence_as_a_batch_draws_it():
    a, b = CounterRNG(NP, 9), CounterRNG(NP, 9)
    first = a.randn(3, 4)
    assert first.shape == (3, 4)
    assert (counter_rng.randn_of(NP, [b], 3, 4)[0] == first).all()
    assert (a.permutation(50) == counter_rng.permutations_of(NP, [b], 50)[0]).all()


def test_the_generator_follows_device_rng():
    assert isinstance(method_rng(NP, 1), CounterRNG)
    assert isinstance(method_rng(Backend("numpy"), 1), np.random.RandomState)
    assert compose("device=cuda").device.rng == "counter" and compose("device=cpu").device.rng == "host"


@pytest.mark.parametrize("method", ["sgd", "forward_forward"])
def test_a_counter_run_learns_and_differs_from_its_host_run(method):
    from sweep import job

    on = (f"method={method}", "device=torch_cpu", "tracker=none", "problem.n_bits=10", "method.hidden=32")
    on += ("problem=sparse_and",) if method == "forward_forward" else ()
    host, counter = job.run(compose(*on)), job.run(compose(*on, "device.rng=counter"))
    assert host.metrics["accuracy"] == counter.metrics["accuracy"] == 1.0
    assert host.curves["train_loss"] != counter.curves["train_loss"]
