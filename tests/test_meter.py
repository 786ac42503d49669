"""Measured energy (sweep.energy.meter): the windowing arithmetic against a counter that is a small real class, RAPL
read from a powercap tree of real files (wrap-around included), and the `none` path on this machine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sweep import job
from sweep.config.view import ConfigView
from sweep.energy import counters, meter
from sweep.energy.counters import RAPLCounter, open_counter
from sweep.energy.meter import measure, meter_solve
from tests.conftest import compose


class Machine:
    """A device with a clock, an energy counter that updates every ``period`` s (as NVML's, about 100 ms), an
    instantaneous power reading, and a workload: `seconds` a solve at `watts` over an idle power `idle`."""

    name = "fake"

    def __init__(self, seconds: float, watts: float, idle: float = 0.0, period: float = 0.0, skew: float = 1.0):
        self.seconds, self.watts, self.idle, self.period, self.skew = seconds, watts, idle, period, skew
        self.t = self.joules = 0.0
        self.now_w = idle
        self.solves = 0

    def run(self, seconds: float, watts: float) -> None:
        self.now_w = watts
        self.t += seconds
        self.joules += seconds * watts * self.skew  # skew: a counter that reads wrong
        self.now_w = self.idle

    def solve(self) -> None:
        self.solves += 1
        self.run(self.seconds, self.watts)

    def sleep(self, s: float) -> None:
        self.run(s, self.idle)

    def clock(self) -> float:
        return self.t

    def read_j(self) -> float:
        if not self.period:
            return self.joules
        # the counter as of its last update: energy up to the last multiple of the period (constant power between)
        last = int(self.t / self.period) * self.period
        return round(self.joules - (self.t - last) * self.idle * self.skew, 6)  # mJ, as NVML: no float noise

    def power_w(self) -> float | None:
        return self.now_w

    def facts(self) -> dict[str, str]:
        return {"gpu.name": "Fake"}

    def probe(self, seconds: float, sample) -> None:
        for _ in range(round(seconds / 0.01)):
            self.now_w = 300.0  # the reading under load
            sample()
            self.run(0.01, 300.0)


def metered(m: Machine, window_s: float = 1.0):
    meter._baselines.clear()
    return meter_solve(
        m.solve,
        ConfigView({"backend": "torch", "torch_device": "cuda"}),
        m.clock,
        window_s,
        counter=m,
        now=m.clock,
        sleep=m.sleep,
    )


def test_short_solve_is_repeated_until_the_window_is_long_enough():
    m = Machine(seconds=0.3, watts=50.0)
    r = measure(m.solve, m, m.clock, meter.Baseline(0.0, 0.0, 1.0, "", 0.0), window_s=1.0, sleep=m.sleep)
    assert (r.repeats, m.solves) == (4, 4)  # 0.9 s < 1 s <= 1.2 s
    assert r.window_s == pytest.approx(1.2)
    assert r.joules == pytest.approx(15.0)  # 50 W x 0.3 s per solve, not per window


def test_long_solve_runs_once():
    m = Machine(seconds=2.5, watts=40.0)
    r = measure(m.solve, m, m.clock, meter.Baseline(0.0, 0.0, 1.0, "", 0.0), window_s=1.0, sleep=m.sleep)
    assert (r.repeats, r.joules) == (1, pytest.approx(100.0))


def test_idle_power_is_measured_first_and_subtracted():
    """A 100 ms counter (NVML's period): reads aligned to its updates, idle measured and taken off, the window at
    least MIN_PERIODS updates (1 s here, though window_s asks 0.5 s)."""
    m = Machine(seconds=0.3, watts=250.0, idle=100.0, period=0.1)
    metrics, tags = metered(m, window_s=0.5)
    assert tags == {"energy.meter": "fake", "gpu.name": "Fake"}
    assert metrics["energy_idle_w"] == pytest.approx(100.0)
    assert metrics["energy_counter_period_s"] == pytest.approx(0.1)
    assert metrics["energy_measure_repeats"] == 4  # 1.2 s >= 10 periods
    assert metrics["energy_measured_gross_j"] == pytest.approx(75.0 + 100.0 * 0.1 / 4, rel=0.02)  # + idle tail
    assert metrics["energy_measured_j"] == pytest.approx(45.0, rel=1e-3)  # (250 - 100) W x 0.3 s
    assert metrics["energy_calibration_ratio"] == pytest.approx(1.0, abs=0.01)
    # the static part: idle power over the solve's share of the window; static + dynamic = gross
    window = metrics["energy_measure_window_s"] / metrics["energy_measure_repeats"]
    assert metrics["energy_static_j"] == pytest.approx(100.0 * window)
    assert metrics["energy_static_j"] + metrics["energy_measured_j"] == pytest.approx(
        metrics["energy_measured_gross_j"]
    )


def test_a_training_is_metered_once_beside_what_a_fixed_50_w_idle_would_report():
    """method=char_model's meter: one window around the training call, less the idle measured on the host (53.3 W
    here, lwta_k2's), and beside it the group's constant 50 W: 3.3 W x the window apart."""
    m = Machine(seconds=0.0, watts=0.0, idle=53.3, period=0.1)
    meter._baselines.clear()
    device = ConfigView({"backend": "torch", "torch_device": "cuda"})
    out, metrics, tags = meter.meter_once(lambda: m.run(2.0, 250.0) or "model", device, m.clock, m, m.clock, m.sleep)
    assert out == "model" and tags == {"energy.meter": "fake", "gpu.name": "Fake"}
    assert metrics["energy_idle_w"] == pytest.approx(53.3)
    assert metrics["train_energy_measured_j"] == pytest.approx((250.0 - 53.3) * 2.0, rel=0.01)
    span = metrics["energy_measure_window_s"]
    assert metrics["train_energy_fixed50_j"] - metrics["train_energy_measured_j"] == pytest.approx(3.3 * span)
    assert m.solves == 0  # the training ran once: never repeated to fill a window


def test_a_counter_that_disagrees_with_the_power_reading_records_nothing(capsys):
    m = Machine(seconds=0.3, watts=250.0, idle=100.0, period=0.1, skew=0.8)
    metrics, tags = metered(m)
    assert metrics == {}
    assert tags["energy.meter"] == "none" and "calibration probe" in tags["energy.meter_reason"]
    ratio = float(re.search(r"ratio ([\d.]+)", tags["energy.meter_reason"]).group(1))
    assert ratio == pytest.approx(0.8, abs=0.02) and tags["gpu.name"] == "Fake"
    assert capsys.readouterr().err.count("measured energy not recorded") == 1  # one line


def test_a_solve_that_costs_nothing_above_idle_is_not_recorded():
    m = Machine(seconds=0.3, watts=100.0, idle=100.0, period=0.1)
    metrics, tags = metered(m)
    assert metrics == {} and "not above idle" in tags["energy.meter_reason"]


def test_a_batch_share_divides_the_energy_not_the_settings():
    shares = meter.per_run({"energy_measured_j": 8.0, "energy_measured_gross_j": 12.0, "energy_idle_w": 100.0}, 4)
    assert shares == {"energy_measured_j": 2.0, "energy_measured_gross_j": 3.0, "energy_idle_w": 100.0}


def powercap(root: Path, zones: dict[str, tuple[str, int, int]]) -> Path:
    """A powercap tree: zone dir -> (name, energy_uj, max_energy_range_uj)."""
    for zone, (name, uj, top) in zones.items():
        d = root / zone
        d.mkdir(parents=True, exist_ok=True)
        (d / "name").write_text(name + "\n")
        (d / "energy_uj").write_text(f"{uj}\n")
        (d / "max_energy_range_uj").write_text(f"{top}\n")
    return root


def test_rapl_sums_packages_and_dram_and_unwraps(tmp_path):
    root = powercap(
        tmp_path,
        {
            "intel-rapl:0": ("package-0", 999_000_000, 999_999_999),  # wraps during the window
            "intel-rapl:0/intel-rapl:0:0": ("core", 5, 999_999_999),  # inside the package figure: not added
            "intel-rapl:0/intel-rapl:0:1": ("dram", 100, 999_999_999),
            "intel-rapl:1": ("package-1", 0, 999_999_999),
            "intel-rapl:2": ("psys", 0, 999_999_999),  # the platform zone overlaps the packages: not added
        },
    )
    c = RAPLCounter(root)
    assert [z.name for z in c.zones] == ["intel-rapl:0", "intel-rapl:0:1", "intel-rapl:1"]
    (root / "intel-rapl:0" / "energy_uj").write_text("499999\n")  # 999_000_000 -> wrap -> 499_999: +1.5 J
    (root / "intel-rapl:0" / "intel-rapl:0:1" / "energy_uj").write_text("2000100\n")  # +2 J
    (root / "intel-rapl:1" / "energy_uj").write_text("3000000\n")  # +3 J
    (root / "intel-rapl:2" / "energy_uj").write_text("9000000\n")
    (root / "intel-rapl:0" / "intel-rapl:0:0" / "energy_uj").write_text("9000000\n")
    assert c.read_j() == pytest.approx(6.5)


def test_rapl_meter_end_to_end_on_a_powercap_tree(tmp_path):
    """RAPL read from its files: 10 W idle, a probe that raises the rate (RAPL has no second reading to check the
    counter against), a solve of 0.25 s at 20 W: 2.5 J above idle each."""
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", 0, 2**32)})
    f = root / "intel-rapl:0" / "energy_uj"
    t = [0.0]

    def spend(seconds: float, watts: float) -> None:  # written where the kernel would write it
        t[0] += seconds
        f.write_text(str(int(f.read_text()) + round(seconds * watts * 1e6)))

    class Rapl(RAPLCounter):
        def probe(self, seconds: float, sample) -> None:
            spend(seconds, 40.0)

    meter._baselines.clear()
    metrics, tags = meter_solve(
        lambda: spend(0.25, 20.0),
        ConfigView({"backend": "numpy"}),
        lambda: t[0],
        1.0,
        counter=Rapl(root),
        now=lambda: t[0],
        sleep=lambda s: spend(s, 10.0),
    )
    assert tags["energy.meter"] == "rapl"
    assert metrics["energy_idle_w"] == pytest.approx(10.0)
    assert metrics["energy_calibration_ratio"] == pytest.approx(4.0, rel=0.01)
    assert metrics["energy_measure_repeats"] == 4.0
    assert metrics["energy_measured_j"] == pytest.approx(2.5, rel=0.01)


def test_no_counter_says_why(tmp_path):
    counter, reason = open_counter(ConfigView({"backend": "numpy"}), powercap=tmp_path)
    assert counter is None and "no RAPL counter" in reason
    # cuda on a machine without a GPU: NVML cannot start (no driver), and the reason names NVML; with one, it opens
    counter, reason = open_counter(ConfigView({"backend": "torch", "torch_device": "cuda"}), powercap=tmp_path)
    if __import__("torch").cuda.is_available():
        assert counter is not None and counter.name == "nvml" and counter.read_j() > 0
    else:
        assert counter is None and "NVML" in reason


def test_run_without_a_counter_is_tagged_none():
    r = job.run(compose("tracker=energy", "method=gf2"))
    counter, reason = open_counter(ConfigView({"backend": "numpy"}))  # this machine's own RAPL, if any
    if counter is None:
        assert r.tags["energy.meter"] == "none" and r.tags["energy.meter_reason"] == reason
        assert "energy_measured_j" not in r.metrics
    else:
        assert r.tags["energy.meter"] in ("rapl", "none")  # none: the probe or idle check refused (its reason)
        assert ("energy_measured_j" in r.metrics) == (r.tags["energy.meter"] == "rapl")
    r = job.run(compose("tracker=energy", "method=gf2", "tracker.meter=none"))
    assert r.tags["energy.meter_reason"] == "tracker.meter=none"


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a GPU (a session lent one runs it)")
def test_measured_joules_of_a_long_gpu_solve_match_the_power_reading_times_time():
    """NVML's counter over a 3 s window of batched sgd solves on the GPU against the driver's instantaneous power
    reading sampled through the same window and integrated: within 10% (measured on an H200: 0.4-1%)."""
    import threading
    import time

    from tests.test_batch_methods import jobs

    js = jobs("sgd", "sparse_parity", [(s, 0.1, 0.01) for s in range(2048)], "tracker=none", "device=cuda")
    solve = lambda: type(js[0].method).solve_batch([j.method for j in js], [j.ctx for j in js])  # noqa: E731
    solve()  # warm-up
    counter = counters.NVMLCounter("cuda")
    base = meter.measure_baseline(counter, time.perf_counter, time.sleep)
    assert base.reason == "" and base.idle_w > 0
    samples, stop = [], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(counter.power_w())
            stop.wait(0.01)

    th = threading.Thread(target=sample)
    th.start()
    m = measure(solve, counter, js[0].backend.clock, base, window_s=3.0)
    stop.set()
    th.join()
    assert m.window_s >= 3.0 and m.joules > 0
    mean_w = sum(samples) / len(samples)
    assert m.gross_j * m.repeats / m.window_s == pytest.approx(mean_w, rel=0.10)
