"""Every method x problem: the allowed ones solve a small instance; the others are refused at config time."""

from __future__ import annotations

import numpy as np
import pytest
from hydra.utils import get_class

from sweep import job
from sweep.backend import Backend
from sweep.config.check import check_job
from sweep.errors import ConfigError
from sweep.methods.base import Context
from sweep.methods.gf2 import GF2
from sweep.paths import CONF_DIR
from sweep.problems.sparse_parity import SparseParity
from sweep.trace.trace import NULL_TRACE
from tests.conftest import compose

# the sparse-bit problems and their methods; problem=chars and its language models: tests/test_chars.py
CHARS_METHODS = ("bigram", "mlp_lm", "gpt", "char_model")  # char_model: tests/test_char_challenge.py
METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml") if p.stem not in CHARS_METHODS)
PROBLEMS = sorted(p.stem for p in (CONF_DIR / "problem").glob("*.yaml") if p.stem != "chars")
BASE = ("problem.n_bits=10", "problem.n_train=500", "tracker=none")
# small, fast settings per method (the defaults are tuned for n=20)
SMALL = {
    "sgd": ("method.hidden=64",),
    "sign_sgd": ("method.hidden=64",),
    "curriculum": ("method.hidden=64", "method.schedule=[6]"),
    "forward_forward": ("problem.n_bits=6", "problem.k_sparse=2"),  # FF solves parity only at small n
    "km": ("method.influence_samples=40",),  # AND's influence is 1/4 at k=3
}


def allowed(method: str, problem: str) -> bool:
    cfg = compose(f"method={method}", f"problem={problem}")
    return get_class(cfg.problem._target_).name in get_class(cfg.method._target_).problems


def test_every_method_declares_its_problems():
    for m in METHODS:
        assert get_class(compose(f"method={m}").method._target_).problems, m
    assert {"sgd", "sign_sgd", "curriculum", "gf2", "km", "fourier", "smt", "forward_forward"} <= set(METHODS)
    assert {"sparse_parity", "sparse_sum", "sparse_and"} <= set(PROBLEMS)


COMBOS = [(m, p) for m in METHODS for p in PROBLEMS]


@pytest.mark.parametrize("method, problem", COMBOS)
def test_allowed_combinations_solve_and_others_are_refused(method, problem):
    overrides = (f"method={method}", f"problem={problem}", *BASE, *SMALL.get(method, ()))
    cfg = compose(*overrides)
    if not allowed(method, problem):
        with pytest.raises(
            ConfigError,
            match=rf"method={method} does not apply to problem={problem}.*"
            rf"applies to problem in \{{.*sparse_(parity|sum)",
        ):
            check_job(cfg)
        return
    r = job.run(cfg)
    assert r.metrics["accuracy"] == 1.0, (method, problem)
    if "secret_found" in r.tags:
        assert r.tags["secret_found"] == r.tags["secret"]


def test_refusal_happens_before_any_job_work(monkeypatch):
    """The check runs in check_job(): the method is never instantiated."""
    from sweep.methods import sgd

    monkeypatch.setattr(sgd.SGD, "solve", lambda *a: pytest.fail("solve ran"))
    with pytest.raises(ConfigError, match="method=sign_sgd does not apply to problem=sparse_sum"):
        job.run(compose("method=sign_sgd", "problem=sparse_sum"))


def test_fourier_refuses_too_many_subsets_at_config_time():
    with pytest.raises(ConfigError, match=r"C\(n_bits=100, 4\) = 3,921,225 .*method\.max_subsets=2,000,000"):
        check_job(compose("method=fourier", "problem.n_bits=100", "problem.k_sparse=4"))
    check_job(compose("method=fourier", "problem.n_bits=100", "problem.k_sparse=4", "method.max_subsets=4000000"))


def test_fourier_with_a_chunk_past_every_subset_scores_them_all_in_one():
    """Issue 43, seventh round: `method.chunk=1e30` passed the check (its footprint counts at most every subset) and
    failed the run (itertools.islice takes no stop past sys.maxsize); it scores as one chunk of every subset."""
    small = (*BASE, "problem.n_bits=12", "tracker=none")
    one = job.run(compose("method=fourier", *small, f"method.chunk={10**30}"))
    chunked = job.run(compose("method=fourier", *small, "method.chunk=7"))
    assert one.metrics["accuracy"] == chunked.metrics["accuracy"] == 1.0
    assert one.metrics["subsets_scored"] == chunked.metrics["subsets_scored"] > 7


def test_km_refuses_more_influence_samples_than_training_inputs():
    with pytest.raises(ConfigError, match=r"method.influence_samples=600 .* problem.n_train=500"):
        check_job(compose("method=km", "method.influence_samples=600", "problem.n_train=500"))


def test_solve_learns_and_evaluation_comes_after():
    """wall_clock_s times solve(): the answer's accuracy is evaluated by finalize(), which job.run calls after
    reading the clock (methods/base.py, Outcome)."""
    prob = SparseParity(n_bits=20, k_sparse=3, seed=42)
    data = prob.generate()
    out = GF2().solve(Context(problem=prob, data=data, backend=Backend(), trace=NULL_TRACE))
    assert out.secret_found == data.secret and np.isnan(out.accuracy)
    assert out.finalize().accuracy == 1.0 and out.train_accuracy == 1.0


def test_gf2_solves_every_seed_42_to_141():
    """Rank-deficient first n+1 rows (about 1 seed in 5 at n=20) must not give a wrong subset."""
    be = Backend()
    grown = 0
    for seed in range(42, 142):
        prob = SparseParity(n_bits=20, k_sparse=3, seed=seed)
        data = prob.generate()
        out = GF2().solve(Context(problem=prob, data=data, backend=be, trace=NULL_TRACE))
        assert out.secret_found == data.secret, seed
        grown += out.extra["rows_used"] > 21
    assert grown > 0  # the rank-deficient case really occurred


def test_curriculum_widens_and_keeps_the_secret():
    r = job.run(
        compose(
            "method=curriculum",
            "problem.n_bits=30",
            "method.hidden=64",
            "method.schedule=[8,16]",
            "problem.n_train=500",
            "tracker=none",
        )
    )
    assert r.metrics["accuracy"] == 1.0 and r.metrics["stages"] == 3.0


def test_sign_sgd_update_is_the_sign_of_the_gradient():
    import array_api_compat.numpy as xp

    from sweep.methods.sign_sgd import SignSGD

    p = np.array([1.0, -2.0, 3.0])
    SignSGD(lr=0.5, wd=0.0).make_update(xp)(p, np.array([10.0, -0.001, 0.0]), True)
    np.testing.assert_array_equal(p, [0.5, -1.5, 3.0])


@pytest.mark.parametrize("method", ["smt", "fourier", "forward_forward"])
def test_methods_emit_trace_events(method):
    r = job.run(compose(f"method={method}", *BASE, *SMALL.get(method, ()), "tracker=ard"))
    assert r.metrics["reads"] > 0 and r.metrics["writes"] > 0


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_whole_data_set_evaluated_in_row_chunks_equals_one_pass(dtype):
    """The curves and accuracies evaluate 1000 x 200 forward passes EVAL_ROWS rows at a time (sgd.predict_rows):
    under float64 the same bits as the one pass they replace, so every recorded figure is unchanged. Under
    float32 an output may differ in its last bit on some CPUs: OpenBLAS's float32 kernels for AMD's Zen (seen on
    an AMD EPYC) order a 1000-row and a 128-row product's sums differently."""
    from sweep.methods.sgd import EVAL_ROWS, SGD, init_params

    xp = Backend(name="numpy", device="cpu", dtype=dtype).xp
    x = np.random.RandomState(0).choice([-1.0, 1.0], size=(1000, 20)).astype(dtype)
    assert x.shape[0] > EVAL_ROWS
    sgd = SGD()
    for seed in range(20):
        p, rng = init_params(20, 200, seed)
        p = {k: (v + rng.randn(*v.shape) * 0.1).astype(dtype) for k, v in p.items()}  # nonzero biases too
        whole = sgd.predict(xp, p, x)
        if dtype == "float64":
            assert np.array_equal(sgd.predict_rows(xp, p, x), whole)
        else:  # within a float32 rounding of each output
            np.testing.assert_allclose(sgd.predict_rows(xp, p, x), whole, rtol=4e-7, atol=1e-6)
        assert sgd.predict_rows(xp, p, x).dtype == whole.dtype
