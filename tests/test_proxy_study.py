"""The proxy study (issue 42): its statistics on data whose answer is known, the cache simulator's profile parsed
from a real run under valgrind, and the GPU slice's harness run on this CPU with a counter made of the process's
own CPU time (a fake counter: the meter's arithmetic and the slice's resume and appends are the real ones)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from scipy import stats

from sweep.proxy_study import cachegrind, dataset, design
from sweep.proxy_study import stats as st


def test_spearman_interval_covers_and_the_configuration_is_the_unit():
    """A proxy monotone in the target up to noise: rho near 1 and its interval covers the true rank correlation;
    repeats of one configuration do not narrow the interval (the bootstrap resamples configurations)."""
    rng = np.random.default_rng(1)
    x = np.arange(12, dtype=float)
    y = x + rng.normal(0, 2.0, 12)
    truth = stats.spearmanr(x, y).statistic
    one = st.rho_interval([f"c{i}" for i in range(12)], x, y)
    assert one.n == 12 and one.value == pytest.approx(truth)
    assert one.low <= truth <= one.high and one.high - one.low > 0.05
    # each configuration measured 3 times with small noise: still 12 points, the same interval up to the noise
    configs = [f"c{i}" for i in range(12) for _ in range(3)]
    three = st.rho_interval(configs, np.repeat(x, 3), np.repeat(y, 3) + rng.normal(0, 1e-3, 36))
    assert three.n == 12 and three.value == pytest.approx(one.value)
    assert three.high - three.low == pytest.approx(one.high - one.low, abs=0.1)
    # coverage: over 40 independent samples of 15 points, the 95% interval covers the population's rho in most
    population = 0.8
    covered = 0
    for seed in range(40):
        r = np.random.default_rng(100 + seed)
        a, b = r.multivariate_normal([0, 0], [[1, population], [population, 1]], 15).T
        iv = st.rho_interval([str(i) for i in range(15)], a, b, n=400)
        covered += iv.low <= 6 / np.pi * np.arcsin(population / 2) <= iv.high  # Spearman's rho of a normal pair
    assert covered >= 32


def test_partial_correlation_is_the_residuals_correlation():
    """Partial Spearman given z equals the hand computation on ranks (numpy's least squares); a proxy that is only
    a copy of the time says nothing once the time is given."""
    rng = np.random.default_rng(2)
    z = rng.normal(size=30)
    x, y = z + rng.normal(0, 0.5, 30), z + rng.normal(0, 0.5, 30)
    rx, ry, rz = (stats.rankdata(v) for v in (x, y, z))
    A = np.column_stack([np.ones(30), rz])
    ex, ey = (r - A @ np.linalg.lstsq(A, r, rcond=None)[0] for r in (rx, ry))
    assert st.partial_spearman(x, y, z) == pytest.approx(np.corrcoef(ex, ey)[0, 1])
    # the textbook formula for one control agrees
    rxy, rxz, ryz = (stats.spearmanr(a, b).statistic for a, b in ((x, y), (x, z), (y, z)))
    hand = (rxy - rxz * ryz) / np.sqrt((1 - rxz**2) * (1 - ryz**2))
    assert st.partial_spearman(x, y, z) == pytest.approx(hand)
    assert abs(st.partial_spearman(z * 2 + 1, y, z)) < 1e-6 or np.isnan(st.partial_spearman(z * 2 + 1, y, z))


def test_counts_model_recovers_costs_and_scores_held_out_configurations():
    """Joules = 2 per kernel + 0.5 per byte: the fit finds the costs and the held-out error is ~0; with a count the
    target does not follow, the error is the noise's, and the worst configuration is named."""
    rng = np.random.default_rng(3)
    kernels, bytes_ = rng.uniform(10, 100, 10), rng.uniform(100, 1000, 10)
    joules = 2 * kernels + 0.5 * bytes_
    configs = [f"c{i}" for i in range(10)]
    m = st.counts_model(configs, {"kernels": kernels, "bytes": bytes_}, joules)
    assert m.coef == pytest.approx([2, 0.5], rel=1e-6) and m.mape < 1e-9 and m.n == 10
    noisy = joules * rng.uniform(0.9, 1.1, 10)
    m = st.counts_model(configs, {"kernels": kernels, "bytes": bytes_}, noisy)
    assert 0.01 < m.mape < 0.2 and m.worst[0] in configs
    assert np.isnan(st.counts_model(configs[:2], {"k": kernels[:2]}, joules[:2]).mape)  # too few to hold any out


def test_dataset_append_keeps_every_row_and_widens_columns(tmp_path):
    p = tmp_path / "x.csv"
    dataset.append(p, {"arm": "a", "repeat": 0, "j": 1.5})
    dataset.append(p, {"arm": "b", "repeat": 0, "kernels": 7})
    rows = dataset.read_all(tmp_path)
    assert [r["arm"] for r in rows] == ["a", "b"] and rows[0]["kernels"] == "" and rows[1]["kernels"] == "7"
    assert rows[0]["file"] == "x.csv" and not list(tmp_path.glob("*.tmp"))
    assert dataset.slug("NVIDIA H200") == "nvidia-h200"


def test_design_reads_the_preset():
    """Every arm the preset sweeps and every CPU twin exists and composes; each is repeated 3 times, every
    configuration once before any repeat."""
    gpu, cpu = design.gpu_design(), design.cpu_design()
    arms = {a for a, _ in gpu}
    assert len(arms) >= 15 and {r for _, r in gpu} == {0, 1, 2} and [r for _, r in gpu[: len(arms)]] == [0] * len(arms)
    assert all((design.ARMS / f"{a}.yaml").is_file() for a in arms)
    cfg = design.compose(design.overrides("gpt_math256", 2, True))
    assert cfg.method.attention == "math" and cfg.problem.block_size == 256 and cfg.tracker.profile
    assert cfg.extra.repeat == 2 and cfg.device.name == "cuda"
    cfg = design.compose(design.overrides("cpu_gpt_checkpoint", 0, False))
    assert cfg.method.checkpoint and cfg.device.name == "torch_cpu" and cfg.tracker.hierarchy == "cpu"
    assert len(cpu) == 3 * len({a for a, _ in cpu})


@pytest.mark.slow  # ~20-25 s: valgrind starts the interpreter and imports the job's modules before the solve
def test_cache_simulator_counts_the_solve_alone(tmp_path):
    """One small numpy solve under callgrind's simulator: the profile's per-object costs add up to its totals, the
    counts are the solve's (far below the imports' millions), and the array libraries hold a share of them."""
    cfg = design.compose(["method.hidden=50", "method.max_epochs=1", "problem.n_train=200", "device.dtype=float32"])
    from sweep.job import job_config

    fig = cachegrind.simulate(job_config(cfg), tmp_path)
    text = (tmp_path / "callgrind.out").read_text()
    totals = [int(v) for v in next(ln for ln in text.splitlines() if ln.startswith("totals:")).split()[1:]]
    per = cachegrind.parse(text)
    sums = [sum(r[i] for r in per.values()) for i in range(len(cachegrind.EVENTS))]
    assert sums[: len(totals)] == totals
    assert 1e4 < fig["cg_d1_misses"] < 5e6 and fig["cg_instructions"] < 2e8
    parts = sum(fig[f"cg_d1_misses_{c}"] for c in cachegrind.CLASSES)
    assert parts == fig["cg_d1_misses"] and fig["cg_d1_misses_arrays"] > 0 and fig["cg_d1_misses_interpreter"] > 0
    assert "desc: D1 cache: 32768 B, 64 B, 8-way associative" in text  # the stated hierarchy simulated
    assert json.loads((tmp_path / "config.json").read_text())["method"]["hidden"] == 50


class CPUTimeCounter:
    """A fake energy counter from this process's CPU time: idle_w when nothing runs, plus active_w while the
    process computes, so a solve costs Joules above idle and the probe raises the rate (the meter's RAPL path:
    no second power reading)."""

    name = "fake"

    def __init__(self, idle_w: float = 10.0, active_w: float = 50.0):
        self.idle_w, self.active_w = idle_w, active_w
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    def read_j(self) -> float:
        return self.idle_w * (time.perf_counter() - self.t0) + self.active_w * (time.process_time() - self.c0)

    def power_w(self):
        return None

    def facts(self):
        return {"cpu.model": "fake CPU-time counter"}

    def probe(self, seconds, sample):
        t = time.perf_counter()
        while time.perf_counter() - t < seconds:
            sum(range(10_000))


def test_slice_runs_resumes_and_appends_on_cpu(tmp_path, monkeypatch):
    """The CPU arm's slice with the fake counter: a first slice of one run writes its row; a budget too small for
    the slowest run seen starts nothing; a second slice resumes at the design's second pair and appends to the same
    file. Each row has the Joules split (static + dynamic = gross), the profiler's counts and the trace's."""
    from sweep.energy import meter
    from sweep.proxy_study import slice as sl

    monkeypatch.setattr(meter, "open_counter", lambda device, powercap=None: (CPUTimeCounter(), ""))
    meter._baselines.clear()
    monkeypatch.setattr(design, "cpu_design", lambda: [("cpu_fused", 0), ("cpu_gpt_mid", 0)])
    fast = ["tracker.meter_window_s=0.2"]
    first = sl.run_slice(tmp_path, budget_s=300, on_gpu=False, limit=1, extra=fast)
    assert first.written == ["cpu_fused repeat=0"] and first.left == 1 and first.path.name.startswith("cpu-")
    # a budget already spent by the slowest run seen: nothing starts, nothing is written
    none = sl.run_slice(tmp_path, budget_s=0.001, on_gpu=False, extra=fast)
    assert none.written == [] and none.left == 1 and len(dataset.read(first.path)) == 1
    second = sl.run_slice(tmp_path, budget_s=300, on_gpu=False, extra=fast)
    assert second.written == ["cpu_gpt_mid repeat=0"] and second.left == 0 and second.path == first.path
    rows = dataset.read(first.path)
    assert [r["arm"] for r in rows] == ["cpu_fused", "cpu_gpt_mid"]
    for r in rows:
        dyn, static, gross = (float(r[k]) for k in ("energy_measured_j", "energy_static_j", "energy_measured_gross_j"))
        assert dyn > 0 and static > 0 and dyn + static == pytest.approx(gross)
        assert float(r["kernels"]) > 10 and float(r["profiled_flops"]) > 0 and float(r["profiled_read_bytes"]) > 0
        assert float(r["dmd"]) > 0 and r["energy_meter"] == "fake" and float(r["energy_calibration_ratio"]) > 1
        assert r["status"] == "FINISHED" and float(r["L1_reads"]) > 0 and r["device"] == first.device
        assert len(r["commit"]) >= 7 and r["torch"] and float(r["job_s"]) > 0
    assert float(rows[1]["profiled_flops"]) > float(rows[0]["profiled_flops"])  # the gpt does more matmul work


def _rows(device: str, arms: dict[str, float], repeats: int = 3) -> list[dict]:
    """Slice rows whose dynamic Joules are 1e-9 x kernels-free bytes: dmd orders them, ard is noise."""
    rng = np.random.default_rng(len(device))
    out = []
    for arm, size in arms.items():
        for r in range(repeats):
            out.append(
                {
                    "device": device,
                    "arm": arm,
                    "repeat": r,
                    "status": "FINISHED",
                    "energy_measured_j": size * (1 + rng.normal(0, 0.01)),
                    "dmd": size * 3,
                    "ard": rng.uniform(1, 10),
                    "wall_clock_s": 1 + size * 1e-3,
                    "kernels": 100,
                    "L1_reads": size * 10,
                    "L1_writes": size,
                }
            )
    return out


def test_compare_reads_every_slice_and_says_what_each_device_holds(tmp_path):
    """Two GPU models' slices and a failed run: the report counts each model's runs, ranks per model with
    intervals, excludes the failed run with its reason, fits the counts model, and draws the grid."""
    from sweep.compare.__main__ import main
    from sweep.proxy_study.report import dataset_study

    arms = {f"gpt_{i}": 10.0 * (i + 1) for i in range(5)} | {f"standard_h{h}": float(h) for h in (4000, 16000)}
    for row in _rows("NVIDIA H200", arms):
        dataset.append(tmp_path / "nvidia-h200-2026-11-27.csv", row)
    for row in _rows("NVIDIA H100", dict(list(arms.items())[:4]), repeats=1):
        dataset.append(tmp_path / "nvidia-h100-2026-11-28.csv", row)
    dataset.append(
        tmp_path / "nvidia-h100-2026-11-28.csv",
        {"device": "NVIDIA H100", "arm": "gpt_4", "repeat": 0, "status": "FAILED", "error": "CUDA out of memory"},
    )
    out = tmp_path / "out"
    assert dataset_study("proxy_study", tmp_path, out) == 0
    text = (out / "proxy_study.md").read_text()
    assert "Runs held per device: NVIDIA H100: 5, NVIDIA H200: 21" in text
    h200 = text.split("### NVIDIA H200")[1]
    assert "21 runs, 7 configurations" in h200 and "| dmd | +1.00 [+1.00, +1.00]" in h200
    assert "held-out MAPE" in h200 and "Excluded" not in h200
    assert "Excluded (1): gpt_4 repeat=0: CUDA out of memory" in text.split("### NVIDIA H100")[1]
    assert (out / "proxy_study.png").stat().st_size > 10_000
    assert dataset_study("proxy_study", tmp_path / "empty", out) == 1  # no runs yet: one line, exit 1
    # the command: sweep-compare proxy_study reads the repository's dataset (the CPU ground truth is in it)
    assert main(["proxy_study", "--out", str(tmp_path / "cmd"), "--no-plot"]) == 0
    assert "CPU cache simulator" in (tmp_path / "cmd" / "proxy_study.md").read_text()
