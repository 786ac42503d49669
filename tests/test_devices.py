"""device=cpu (numpy) and the torch path (device=torch_cpu here, device=cuda on a GPU) agree, seed for seed;
device=cuda without a GPU is refused before the job starts; torch runs report warm-up apart."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from sweep import job
from tests.conftest import compose, run_sweep

torch = pytest.importorskip("torch")
GPU = ["cuda"] if torch.cuda.is_available() else []  # where this machine has a GPU, the torch path on it too

# one allowed problem per method, sizes small enough for CI (float64 on both sides)
CASES = {
    "sgd": ("problem.n_bits=8", "method.hidden=32", "problem.n_train=300"),
    "sign_sgd": ("problem.n_bits=10", "method.hidden=32", "problem.n_train=300"),
    "curriculum": ("problem.n_bits=10", "method.hidden=32", "method.schedule=[6]", "problem.n_train=300"),
    "forward_forward": ("problem=sparse_and", "problem.n_bits=8", "method.hidden=32", "problem.n_train=300"),
    "gf2": (),
    "km": ("problem=sparse_sum",),
    "fourier": ("problem=sparse_and", "problem.n_bits=12"),
    "smt": ("problem.k_sparse=4",),
    "ols": ("problem=sparse_sum",),
    "sgd_linear": ("problem=sparse_sum",),  # method=sgd's linear model (squared error)
    "fourier_degree_one": ("problem=sparse_sum",),
}
METHOD = {"sgd_linear": "sgd", "fourier_degree_one": "fourier"}  # cases that are a method on another problem


def _run(method: str, device: str, *extra: str):
    return job.run(
        compose(f"method={METHOD.get(method, method)}", f"device={device}", "tracker=none", *CASES[method], *extra)
    )


@pytest.mark.parametrize("torch_device", ["torch_cpu", *GPU])
@pytest.mark.parametrize("method", sorted(CASES))
def test_numpy_and_torch_find_the_same_answer(method, torch_device):
    # cuda's defaults are float32 and draws on the device (device.rng=counter): numpy's run is float64, host draws
    a, b = _run(method, "cpu"), _run(method, torch_device, "device.dtype=float64", "device.rng=host")
    assert a.metrics["accuracy"] == b.metrics["accuracy"] == 1.0
    assert a.metrics["epochs"] == b.metrics["epochs"]
    assert a.tags.get("secret_found") == b.tags.get("secret_found")
    assert "warmup_s" in b.metrics and "warmup_s" not in a.metrics  # the torch path times its warm-up apart
    for curve in a.curves:
        assert a.curves[curve] == pytest.approx(b.curves[curve], abs=1e-9), curve


@pytest.mark.parametrize("method", ["sgd"])
def test_compiled_hot_step_gives_the_same_result(method):
    # aot_eager: torch.compile's graph capture without C++ code generation, which takes minutes on 2 cores
    from torch._dynamo.utils import counters  # torch.compile's own tally of the frames it compiled

    counters.clear()
    plain = _run(method, "torch_cpu")
    assert not counters["frames"]["ok"]  # nothing compiled without the flag
    compiled = _run(method, "torch_cpu", "device.compile=true", "device.compile_backend=aot_eager")
    assert counters["frames"]["ok"] > 0, "device.compile=true ran without compiling anything"
    assert compiled.metrics["accuracy"] == plain.metrics["accuracy"] == 1.0
    assert compiled.metrics["epochs"] == plain.metrics["epochs"]


def test_autocast_runs_the_step_in_lower_precision():
    # float16 matmuls (seed 004's mixed precision) on a float32 net: it still learns, and the numbers differ
    # from float32's (the cast happens)
    f32 = _run("sgd", "torch_cpu", "device.dtype=float32")
    f16 = _run("sgd", "torch_cpu", "device.dtype=float32", "device.autocast=float16")
    assert f16.metrics["accuracy"] == 1.0
    assert f16.curves["train_loss"] != pytest.approx(f32.curves["train_loss"], rel=1e-6)


def test_threads_sets_torchs_intra_op_pool_and_numpys_blas():
    before, blas = torch.get_num_threads(), threadpool_limits(limits=None)  # the latter restores BLAS's pools
    try:
        # pools of 2 first: the suite's processes start with 1 (tests/conftest.py), which device.threads=1 must change
        torch.set_num_threads(2)
        threadpool_limits(limits=2, user_api="blas")
        assert {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"} == {2}
        r = _run("sgd", "torch_cpu", "device.threads=1")
        assert r.metrics["accuracy"] == 1.0 and torch.get_num_threads() == 1
        _run("sgd", "cpu", "device.threads=1")
        assert {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"} == {1}
    finally:
        torch.set_num_threads(before)
        blas.restore_original_limits()


def test_fullgraph_names_the_graph_break_in_one_line():
    # seed 004 compiles with fullgraph=True; SGD's step has data-dependent exits (no sample inside the margin),
    # so torch refuses to make one graph of it: the job fails with one line saying where, not torch's pages
    fullgraph = ("device.compile=true", "device.compile_backend=aot_eager", "device.fullgraph=true")
    with pytest.raises(RuntimeError, match=r"device.fullgraph=true: \w+\.step has a graph break: .+"):
        _run("sgd", "torch_cpu", *fullgraph)
    # also after a job compiled the same step without fullgraph in this process (each job compiles afresh)
    _run("sgd", "torch_cpu", "device.compile=true", "device.compile_backend=aot_eager")
    with pytest.raises(RuntimeError, match="graph break"):
        _run("sgd", "torch_cpu", *fullgraph)


@pytest.mark.new_store
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_gpu_is_refused_before_the_job_starts(store, tmp_path):
    r = run_sweep("device=cuda", "device.local_gpu=true", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "needs a CUDA GPU" in r.stderr and "device=torch_cpu" in r.stderr
    assert "[FINISHED]" not in r.stdout
    assert not (tmp_path / "mlruns" / "mlflow.db").exists()  # no MLflow run, not even a store


def test_a_gpu_is_priced_from_the_modal_table_and_torch_cpu_as_the_cpu():
    """device=cuda's price is the table's rate for device.gpu (written once, in conf/prices/modal_gpu.yaml);
    device=torch_cpu is device=cpu's machine and price."""
    from sweep.config.prices import device_price_per_hour, load_prices

    assert device_price_per_hour(compose("device=cuda", "device.gpu=A10G").device) == load_prices()["A10G"]
    assert device_price_per_hour(compose("device=cuda").device) == load_prices()["L4"]
    cpu, torch_cpu = compose("device=cpu").device, compose("device=torch_cpu").device
    assert device_price_per_hour(torch_cpu) == device_price_per_hour(cpu) > 0
    assert device_price_per_hour(compose("device=cpu", "device.price_per_hour=2.5").device) == 2.5
