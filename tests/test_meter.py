"""Measured energy (sweep.energy.meter): the windowing arithmetic against a counter that is a small real class, RAPL
read from a powercap tree of real files (wrap-around included), and the `none` path on this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep import job
from sweep.config.view import ConfigView
from sweep.energy.meter import RAPLCounter, measure, meter_solve, open_counter
from tests.conftest import compose


class Machine:
    """A clock and an energy counter that advance only when the workload runs: `seconds` a solve at `watts`."""

    name = "fake"

    def __init__(self, seconds: float, watts: float) -> None:
        self.seconds, self.watts = seconds, watts
        self.t = self.joules = 0.0
        self.solves = 0

    def solve(self) -> None:
        self.solves += 1
        self.t += self.seconds
        self.joules += self.seconds * self.watts

    def clock(self) -> float:
        return self.t

    def read_j(self) -> float:
        return self.joules


def test_short_solve_is_repeated_until_the_window_is_a_second():
    m = Machine(seconds=0.3, watts=50.0)
    r = measure(m.solve, m, m.clock, window_s=1.0)
    assert (r.repeats, m.solves) == (4, 4)  # 0.9 s < 1 s <= 1.2 s
    assert r.window_s == pytest.approx(1.2)
    assert r.joules == pytest.approx(15.0)  # 50 W x 0.3 s per solve, not per window


def test_long_solve_runs_once():
    m = Machine(seconds=2.5, watts=40.0)
    r = measure(m.solve, m, m.clock, window_s=1.0)
    assert (r.repeats, r.joules) == (1, pytest.approx(100.0))


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
    root = powercap(tmp_path, {"intel-rapl:0": ("package-0", 0, 2**32)})
    t = [0.0]

    def solve() -> None:  # 0.25 s at 20 W, written where the kernel would write it
        t[0] += 0.25
        f = root / "intel-rapl:0" / "energy_uj"
        f.write_text(str(int(f.read_text()) + 5_000_000))

    metrics, tags = meter_solve(solve, ConfigView({"backend": "numpy"}), lambda: t[0], 1.0, powercap=root)
    assert tags == {"energy.meter": "rapl"}
    assert metrics == {"energy_measured_j": 5.0, "energy_measure_repeats": 4.0, "energy_measure_window_s": 1.0}


def test_no_counter_says_why(tmp_path):
    counter, reason = open_counter(ConfigView({"backend": "numpy"}), powercap=tmp_path)
    assert counter is None and "no RAPL counter" in reason
    # cuda on a machine without a GPU: NVML cannot start (no driver), and the reason names NVML
    counter, reason = open_counter(ConfigView({"backend": "torch", "torch_device": "cuda"}), powercap=tmp_path)
    assert counter is None and "NVML" in reason


def test_run_without_a_counter_is_tagged_none():
    r = job.run(compose("tracker=energy", "method=gf2"))
    counter, reason = open_counter(ConfigView({"backend": "numpy"}))  # this machine's own RAPL, if any
    if counter is None:
        assert r.tags["energy.meter"] == "none" and r.tags["energy.meter_reason"] == reason
        assert "energy_measured_j" not in r.metrics
    else:
        assert r.tags["energy.meter"] == "rapl" and r.metrics["energy_measured_j"] > 0
    r = job.run(compose("tracker=energy", "method=gf2", "tracker.meter=none"))
    assert r.tags["energy.meter_reason"] == "tracker.meter=none"
