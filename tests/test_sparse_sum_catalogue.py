"""problem=sparse_sum with the group's sum methods: ols, sgd (a linear model on squared error) and fourier
(degree-one coefficients) beside km and smt; the applicability table in docs/configuration.md is the classes'."""

from __future__ import annotations

import re

import pytest

from sweep.backend import Backend
from sweep.config.applicability import applicability_table
from sweep.config.check import check_job
from sweep.errors import ConfigError
from sweep.methods.base import Context
from sweep.methods.fourier import Fourier
from sweep.methods.ols import OLS
from sweep.methods.sgd import SGD
from sweep.paths import PROJECT_ROOT
from sweep.problems.sparse_sum import SparseSum
from sweep.trace.trace import Trace
from sweep.variants.standard import Standard
from tests.conftest import compose, run_sweep

SUM_METHODS = {"ols": OLS, "sgd": SGD, "fourier": Fourier}


def _solve(method, seed: int, trace: Trace, scope: str = "published", backend: Backend | None = None):
    prob = SparseSum(n_bits=20, k_sparse=3, seed=seed)
    data = prob.generate()
    ctx = Context(problem=prob, data=data, backend=backend or Backend(), trace=trace, scope=scope, variant=Standard())
    return method.solve(ctx).finalize(), data


@pytest.mark.parametrize("name", sorted(SUM_METHODS))
def test_sum_methods_reach_accuracy_one_on_seeds_42_to_51(name):
    for seed in range(42, 52):
        out, data = _solve(SUM_METHODS[name](), seed, Trace())
        assert out.accuracy == 1.0 and out.train_accuracy == 1.0, (name, seed)
        assert out.secret_found == data.secret, (name, seed)


@pytest.mark.parametrize("name", sorted(SUM_METHODS))
@pytest.mark.parametrize("scope", ["published", "init_sample0", "all_steps"])
def test_sum_methods_trace_writes_before_reads_and_count_operations(name, scope):
    trace = Trace()
    _solve(SUM_METHODS[name](), 42, trace, scope)
    written: set[str] = set()
    for op, buf, size in trace:
        assert size > 0
        if op == 1:
            written.add(buf)
        else:
            assert buf in written, f"{name}: cold read of {buf}"
    assert trace.compute_ops.get("fma", 0) > 0 and len(trace) > 0


def test_sgd_on_sum_is_a_linear_model_the_problem_asks_for():
    """sgd picks its model by the problem's loss: the MLP's hidden width plays no part on sparse_sum."""
    a, _ = _solve(SGD(hidden=200), 43, Trace())
    b, _ = _solve(SGD(hidden=7), 43, Trace())
    assert a.epochs == b.epochs and a.accuracy == b.accuracy == 1.0
    assert SGD.models[SparseSum.loss] is not SGD.models["hinge"]


def test_sgd_on_sum_refuses_the_mlp_variants():
    with pytest.raises(ConfigError, match=r"variant=fused .* problem=sparse_sum .* use variant=standard"):
        check_job(compose("method=sgd", "problem=sparse_sum", "variant=fused"))
    check_job(compose("method=sgd", "problem=sparse_parity", "variant=fused"))


def test_the_documented_applicability_table_is_the_classes():
    readme = (PROJECT_ROOT / "docs" / "configuration.md").read_text()
    table = applicability_table()
    assert table in readme
    rows = {r.split("|")[1].strip(): r for r in table.splitlines()[2:]}
    assert re.search(r"\| yes \|$", rows["ols"]) and "| - |" in rows["sign_sgd"]  # sum column: ols yes


def test_the_sum_sweep_finishes_every_job_with_accuracy_one(store, tmp_path):
    r = run_sweep("-m", "problem=sparse_sum", "method=ols,sgd,km,fourier,smt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    finished = re.findall(r"\[FINISHED\] method=(\w+) accuracy=([\d.]+)", r.stdout)
    assert sorted(m for m, _ in finished) == ["fourier", "km", "ols", "sgd", "smt"]
    assert all(float(a) == 1.0 for _, a in finished)
