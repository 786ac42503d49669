"""device.dtype=float32: every method computes in float32 (the default stays float64, the seeds' precision), and
the published accuracy and epochs at n=20, k=3 on seeds 42-46 hold."""

from __future__ import annotations

import pytest

from sweep import job
from sweep.config.check import check_job
from sweep.errors import ConfigError
from tests.conftest import compose
from tests.test_devices import CASES, METHOD

torch = pytest.importorskip("torch")

# float32 rounding moves the hinge-loss MLP's trajectory a little: on some seeds it stops one epoch earlier or
# later (docs/configuration.md, "Devices and precision"); accuracy does not move
EPOCHS_MAY_MOVE = {"sgd", "sign_sgd"}
# every method on a problem it applies to, at the default sizes (n=20, k=3, hidden=200); forward_forward
# (several seconds a run on 2 cores) is left to benchmarks/bench_methods.py --sections c
DEFAULTS = {
    "sgd": (),
    "sign_sgd": (),
    "curriculum": (),
    "gf2": (),
    "km": (),
    "fourier": (),
    "smt": (),
    "ols": ("problem=sparse_sum",),
    "sgd_linear": ("problem=sparse_sum",),
}


def test_default_is_float64_and_other_dtypes_are_refused():
    assert compose().device.dtype == "float64"
    said = r"device.dtype='float16' is not allowed: did you mean float64 or float32\? expected one of float32, float64"
    with pytest.raises(ConfigError, match=said):
        check_job(compose("device.dtype=float16"))


class Float64Seen(torch.overrides.TorchFunctionMode):
    """Every torch function and tensor method called inside: the names of those that made a float64 tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(o, torch.Tensor) and o.dtype == torch.float64:
                self.seen.add(getattr(func, "__name__", str(func)))
        return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_method_computes_in_float32(case):
    """Methods are written once against the array API: on torch every operation is seen, and none of them
    makes a float64 tensor (no float64 initial weights, constants or accumulators leak in). Two epochs are
    enough to pass through every step of a method (the audit makes each operation slow)."""
    audit = Float64Seen()
    overrides = [
        f"method={METHOD.get(case, case)}",
        "device=torch_cpu",
        "device.dtype=float32",
        "tracker=ard",
        *CASES[case],
    ]
    if "max_epochs" in compose(*overrides).method:
        overrides.append("method.max_epochs=2")
    with audit:
        job.run(compose(*overrides))
    assert audit.seen == set(), f"{case}: float64 from {sorted(audit.seen)}"


@pytest.mark.parametrize("case", sorted(DEFAULTS))
def test_float32_keeps_accuracy_and_epochs_on_seeds_42_to_46(case):
    def figures(dtype: str) -> list[tuple[float, float]]:
        runs = [
            job.run(
                compose(
                    f"method={METHOD.get(case, case)}",
                    f"device.dtype={dtype}",
                    "tracker=none",
                    f"problem.seed={seed}",
                    *DEFAULTS[case],
                )
            )
            for seed in range(42, 47)
        ]
        return [(r.metrics["accuracy"], r.metrics["epochs"]) for r in runs]

    f64, f32 = figures("float64"), figures("float32")
    assert [a for a, _ in f32] == [a for a, _ in f64] == [1.0] * 5
    if case in EPOCHS_MAY_MOVE:
        assert all(abs(e32 - e64) <= 1 for (_, e32), (_, e64) in zip(f32, f64)), (f32, f64)
    else:
        assert f32 == f64


def test_numpy_runs_in_float32_too():
    """device=cpu: the curves computed from the weights are float32 values (and not the float64 run's)."""
    import numpy as np

    a, b = (job.run(compose("device.dtype=" + d, "tracker=none", *CASES["sgd"])) for d in ("float64", "float32"))
    progress = b.curves["hidden_progress_W1"]  # one float32 sum (hidden_progress adds two in Python)
    assert all(float(np.float32(v)) == v for v in progress)
    assert progress != a.curves["hidden_progress_W1"]
