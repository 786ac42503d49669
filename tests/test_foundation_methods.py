"""sgd, gf2 and km solve 20-bit sparse parity through the real job path (config -> RunResult)."""

import pytest

from sweep import job
from tests.conftest import compose


@pytest.mark.parametrize("method", ["sgd", "gf2", "km"])
def test_method_solves_20_bit_parity(method):
    r = job.run(compose(f"method={method}"))
    assert r.status == "FINISHED"
    assert r.metrics["accuracy"] == 1.0
    assert r.metrics["wall_clock_s"] > 0
    assert r.metrics["ard"] > 0 and r.metrics["total_floats"] > 0
    assert r.metrics["cost_usd"] == pytest.approx(r.metrics["wall_clock_s"] * 0.08925 / 3600)
    if method != "sgd":
        assert r.metrics["secret_correct"] == 1.0
        assert r.tags["secret_found"] == r.tags["secret"]


@pytest.mark.parametrize(
    "method, weights",
    [
        ("sgd", ("W1", "W2")),
        ("sign_sgd", ("W1", "W2")),
        ("curriculum", ("W1", "W2")),
        ("forward_forward", ("W0", "W1")),
        ("sgd problem=sparse_sum", ("w",)),  # sgd's linear model (squared loss)
    ],
)
def test_gradient_methods_log_loss_and_hidden_progress_per_matrix(method, weights):
    # seed 002's learning curves: accuracy, train/test loss and ||w_t - w_0||_1 per weight matrix, every epoch
    method, *extra = method.split()
    r = job.run(
        compose(
            f"method={method}",
            *extra,
            "problem.n_bits=10",
            "problem.n_test=100",
            "method.max_epochs=30",
            "tracker=none",
        )
    )
    epochs = int(r.metrics["epochs"])
    names = (
        "train_accuracy",
        "test_accuracy",
        "train_loss",
        "test_loss",
        "hidden_progress",
        *(f"hidden_progress_{w}" for w in weights),
    )
    for name in names:
        assert len(r.curves[name]) == epochs, name
    hp = r.curves["hidden_progress"]
    assert hp[0] == pytest.approx(sum(r.curves[f"hidden_progress_{w}"][0] for w in weights))
    assert 0 < hp[0] and all(v >= 0 for v in r.curves["train_loss"])
    if method != "forward_forward" and epochs > 1:  # FF's loss is its own layers' goodness, not the hinge
        assert r.curves["train_loss"][-1] < r.curves["train_loss"][0]
    if extra:  # the linear model solves the sum in its first epoch: a squared error near 0
        assert r.metrics["accuracy"] == 1.0 and r.curves["train_loss"][-1] < 0.01


def test_sgd_solves_with_rising_hidden_progress():
    r = job.run(compose("method=sgd"))
    assert r.curves["test_accuracy"][-1] == 1.0
    # ||W_t - W_0||_1 grows from the start of training
    assert 0 < r.curves["hidden_progress"][0] < r.curves["hidden_progress"][-1]


def test_same_seed_same_metrics():
    a, b = job.run(compose("method=sgd", "problem.seed=43")), job.run(compose("method=sgd", "problem.seed=43"))
    drop = {"wall_clock_s", "cost_usd", "warmup_s"}
    assert {k: v for k, v in a.metrics.items() if k not in drop} == {
        k: v for k, v in b.metrics.items() if k not in drop
    }


def test_gf2_handles_even_k_and_rank_deficient_seeds():
    for seed in range(10):
        r = job.run(compose("method=gf2", "problem.k_sparse=4", f"problem.seed={seed}", "tracker=none"))
        assert r.metrics["secret_correct"] == 1.0, seed


def test_km_influence_finds_secret():
    r = job.run(compose("method=km", "problem.n_bits=50", "problem.k_sparse=5", "method.influence_samples=3"))
    assert r.metrics["secret_correct"] == 1.0


def test_tracker_none_records_no_trace_figures():
    r = job.run(compose("method=gf2", "tracker=none"))
    assert "ard" not in r.metrics and "tracker_buffers.csv" not in r.artifacts
