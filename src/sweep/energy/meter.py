"""Measured energy: the hardware's cumulative energy counter read around repeated solves.

Counters: the GPU's (NVML, through nvidia-ml-py) for torch on cuda; RAPL through Linux powercap for the CPU
(package zones plus their DRAM sub-zones). A solve shorter than the counter can resolve is repeated until the
window is at least ``window_s`` (1 s by default: NVML and RAPL update every ~10-100 ms), and the energy is
divided by the repeats. The solves measured run untraced, after the timed one, so neither wall_clock_s nor
the trace is touched. Where no counter can be read the run says why (tag ``energy.meter_reason``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from sweep.trace.trace import NULL_TRACE

POWERCAP = Path("/sys/class/powercap")


class Counter(Protocol):
    """A cumulative energy counter."""

    name: str  # the tag energy.meter: nvml | rapl

    def read_j(self) -> float:
        """Joules since some fixed origin (monotonic: wrap-arounds are handled inside)."""
        ...


@dataclass
class Measurement:
    joules: float  # per solve
    repeats: int
    window_s: float


def measure(
    solve: Callable[[], Any],
    counter: Counter,
    clock: Callable[[], float],
    window_s: float = 1.0,
    max_repeats: int = 100_000,
) -> Measurement:
    """Run `solve` until `window_s` has passed (at least once), reading `counter` around the whole window;
    `clock` must wait for the device (Backend.clock synchronises cuda)."""
    e0, t0 = counter.read_j(), clock()
    repeats = 0
    while True:
        solve()
        repeats += 1
        elapsed = clock() - t0
        if elapsed >= window_s or repeats >= max_repeats:
            break
    return Measurement((counter.read_j() - e0) / repeats, repeats, elapsed)


class NVMLCounter:
    """The GPU's total energy since the driver loaded (NVML, Volta and later), in mJ."""

    name = "nvml"

    def __init__(self, torch_device: str) -> None:
        import pynvml  # noqa: PLC0415 - NVML: only for a job on a CUDA GPU; nvidia-ml-py
        import torch  # noqa: PLC0415 - torch: seconds to import, only for device.backend=torch

        pynvml.nvmlInit()
        self._nvml = pynvml
        index = torch.device(torch_device).index or 0
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        # NVML numbers GPUs physically; CUDA_VISIBLE_DEVICES renumbers them for torch, the UUID is the same
        self.handle = (
            pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
            if uuid is not None
            else pynvml.nvmlDeviceGetHandleByIndex(index)
        )
        self.read_j()  # fails here (NVMLError_NotSupported on older GPUs) rather than mid-measurement

    def read_j(self) -> float:
        return self._nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1e3


class RAPLCounter:
    """CPU package (and DRAM) energy from Linux powercap's RAPL zones, summed over sockets.

    Each zone's ``energy_uj`` wraps at ``max_energy_range_uj``; reads are kept per zone and unwrapped (a window
    shorter than one wrap period, minutes at full power, is all this needs)."""

    name = "rapl"

    def __init__(self, root: Path = POWERCAP) -> None:
        zones = []
        for pkg in sorted(root.glob("intel-rapl:*")):
            if pkg.name.count(":") != 1 or not _text(pkg / "name").startswith("package"):
                continue  # sub-zones are picked below; psys (platform) overlaps the packages
            zones.append(pkg)
            zones += [sub for sub in sorted(pkg.glob(f"{pkg.name}:*")) if _text(sub / "name") == "dram"]
        if not zones:
            raise OSError(f"no RAPL package zone under {root}")
        self.zones = zones
        self.ranges = [int(_text(z / "max_energy_range_uj")) for z in zones]
        self.last = [self._raw(z) for z in zones]  # raises PermissionError if energy_uj is root-only
        self.total_uj = 0

    @staticmethod
    def _raw(zone: Path) -> int:
        return int((zone / "energy_uj").read_text())

    def read_j(self) -> float:
        for i, z in enumerate(self.zones):
            raw = self._raw(z)
            delta = raw - self.last[i]
            self.total_uj += delta if delta >= 0 else delta + self.ranges[i] + 1
            self.last[i] = raw
        return self.total_uj / 1e6


def _text(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def open_counter(device: Any, powercap: Path = POWERCAP) -> tuple[Counter | None, str]:
    """The device's counter, or None and the reason (a line for the tag energy.meter_reason)."""
    if device.backend == "torch" and str(device.torch_device).startswith("cuda"):
        try:
            return NVMLCounter(device.torch_device), ""
        except ImportError:
            return None, "nvidia-ml-py is not installed (NVML)"
        except Exception as e:  # noqa: BLE001 - NVMLError and CUDA errors alike: say which, measure nothing
            return None, f"NVML energy counter not readable: {type(e).__name__}: {e}".strip()
    if not (powercap / "intel-rapl:0").exists():
        return None, "no RAPL counter: this CPU or kernel exposes no powercap intel-rapl zone"
    try:
        return RAPLCounter(powercap), ""
    except PermissionError:
        return None, "RAPL energy_uj is not readable by this user (root-only since Linux 5.10; chmod or run as root)"
    except (OSError, ValueError) as e:
        return None, f"RAPL counter not readable: {e}"


def meter_solve(
    solve: Callable[[], Any], device: Any, clock: Callable[[], float], window_s: float, powercap: Path = POWERCAP
) -> tuple[dict[str, float], dict[str, str]]:
    """Metrics energy_measured_j / energy_measure_repeats / energy_measure_window_s and tags energy.meter
    (nvml | rapl | none) and energy.meter_reason (when none) of `solve` on `device` (a device config)."""
    counter, reason = open_counter(device, powercap)
    if counter is None:
        return {}, {"energy.meter": "none", "energy.meter_reason": reason}
    m = measure(solve, counter, clock, window_s)
    if not math.isfinite(m.joules) or m.joules <= 0:  # a counter that did not move is no measurement
        return {}, {
            "energy.meter": "none",
            "energy.meter_reason": f"{counter.name} counter did not advance over {m.window_s:.2f} s",
        }
    return (
        {
            "energy_measured_j": m.joules,
            "energy_measure_repeats": float(m.repeats),
            "energy_measure_window_s": m.window_s,
        },
        {"energy.meter": counter.name},
    )


def measure_solve(tracker: Any, method: Any, ctx: Any, device: Any) -> tuple[dict[str, float], dict[str, str]]:
    """The tracker's measured figures of `method`'s solve (only the energy tracker measures): untraced repeats
    after the timed solve, inside the job, so a Modal job's figure comes back with its result."""
    if tracker is None:
        return {}, {}
    untraced = dataclasses.replace(ctx, trace=NULL_TRACE)
    return tracker.measure(lambda: method.solve(untraced), device, ctx.backend.clock)
