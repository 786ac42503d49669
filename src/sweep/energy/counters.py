"""The hardware's energy counters that sweep.energy.meter reads: NVML's total-energy counter for a GPU (through
nvidia-ml-py), RAPL through Linux powercap for the CPU (package zones plus their DRAM sub-zones); `open_counter`
picks the one for a run's device."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Protocol

POWERCAP = Path("/sys/class/powercap")


class Counter(Protocol):
    """A cumulative energy counter."""

    name: str  # the tag energy.meter: nvml | rapl

    def read_j(self) -> float:
        """Joules since some fixed origin (monotonic: wrap-arounds are handled inside)."""
        ...

    def power_w(self) -> float | None:
        """The device's own instantaneous power reading (the calibration's second opinion), or None."""
        ...

    def facts(self) -> dict[str, str]:
        """Run tags that say which device was measured (name, memory, driver, power limit)."""
        ...

    def probe(self, seconds: float, sample: Callable[[], None]) -> None:
        """Run a known kernel on the device for about ``seconds`` (the calibration probe), calling ``sample``
        every few ms of it (the power reading is taken under load, in the probe's own time)."""
        ...


class NVMLCounter:
    """The GPU's total energy since the driver loaded (NVML, Volta and later), in mJ."""

    name = "nvml"

    def __init__(self, torch_device: str) -> None:
        import pynvml  # noqa: PLC0415 - NVML: only for a job on a CUDA GPU; nvidia-ml-py
        import torch  # noqa: PLC0415 - torch: seconds to import, only for device.backend=torch

        pynvml.nvmlInit()
        self._nvml, self._torch, self.device = pynvml, torch, torch.device(torch_device)
        index = self.device.index or 0
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

    def power_w(self) -> float | None:
        """The instantaneous reading where the driver has it: nvmlDeviceGetPowerUsage averages over about a
        second and lags a change of load (measured on an H200: 0.48-1.08x the counter)."""
        nv = self._nvml
        try:
            v = nv.nvmlDeviceGetFieldValues(self.handle, [nv.NVML_FI_DEV_POWER_INSTANT])[0]
            if v.nvmlReturn == nv.NVML_SUCCESS:
                return v.value.uiVal / 1e3
        except (nv.NVMLError, AttributeError):
            pass
        return nv.nvmlDeviceGetPowerUsage(self.handle) / 1e3

    def facts(self) -> dict[str, str]:
        nv, h = self._nvml, self.handle
        name = nv.nvmlDeviceGetName(h)
        return {
            "gpu.name": name.decode() if isinstance(name, bytes) else str(name),
            "gpu.memory_gib": f"{nv.nvmlDeviceGetMemoryInfo(h).total / 2**30:.1f}",
            "gpu.driver": str(nv.nvmlSystemGetDriverVersion()),
            "gpu.power_limit_w": f"{nv.nvmlDeviceGetPowerManagementLimit(h) / 1e3:.0f}",
        }

    def probe(self, seconds: float, sample: Callable[[], None]) -> None:
        torch = self._torch
        a = torch.randn(4096, 4096, device=self.device)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(4):  # ~1 ms each on an H100/H200: the GPU stays loaded between samples
                a @ a
            torch.cuda.synchronize(self.device)
            sample()


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

    def power_w(self) -> float | None:
        return None  # RAPL is the only reading a CPU gives

    def facts(self) -> dict[str, str]:
        model = next((ln.split(":", 1)[1].strip() for ln in _lines("/proc/cpuinfo") if ln.startswith("model name")), "")
        return {"cpu.model": model} if model else {}

    def probe(self, seconds: float, sample: Callable[[], None]) -> None:
        import numpy as np  # noqa: PLC0415 - numpy: only when a CPU's counter is calibrated

        a = np.random.default_rng(0).standard_normal((256, 256))
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            a @ a


def _text(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""


def _lines(path: str) -> list[str]:
    return _text(Path(path)).splitlines()


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
