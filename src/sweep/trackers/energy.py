"""tracker=energy: the energy model (sweep.energy.model) on tracker.hierarchy, beside every proxy of the same
trace (ard, dmc, dmd, bytedmd at the definition's one byte an element, the LRU cache's figures), so the proxies
and the energy sit side by side in one run; and, where the device has an energy counter, the measured energy of
the solve (sweep.energy.meter).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, ClassVar

from omegaconf import DictConfig, OmegaConf

from sweep.config.fields import Rule, choice, positive_finite
from sweep.energy.counts import profiled_counts
from sweep.energy.hierarchy import check_energy_config, load_hierarchy
from sweep.energy.meter import meter_solve
from sweep.energy.model import energy_each, energy_pass, energy_report
from sweep.trace.replay import PerResult
from sweep.trace.trace import Trace
from sweep.trackers.ard import Reads, ard_each, ard_report
from sweep.trackers.base import TrackerBase, TrackerReport
from sweep.trackers.bytedmd import bytedmd_each, bytedmd_pass, bytedmd_report
from sweep.trackers.cache import cache_pass, cache_report
from sweep.trackers.dmd import dmd, dmd_each, dmd_pass


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


@dataclass
class EnergyTracker(TrackerBase):
    """tracker=energy: modelled energy on tracker.hierarchy, plus the proxies of the same trace: ard, dmc, dmd,
    bytedmd and the whole-buffer LRU cache's figures (cache_miss_floats, ...; capacity tracker.cache_size_floats)."""

    name: str = "energy"
    hierarchy: str = "cpu"
    levels: dict[str, Any] = field(default_factory=dict)  # overrides of the file's levels, key by key
    ops_pj: dict[str, Any] = field(default_factory=dict)  # overrides of the file's operation prices
    bytes_per_float: int | None = None  # None: the file's
    meter: str = "auto"  # auto: measure with the device's energy counter where there is one; none: never
    meter_window_s: float = 1.0  # solves are repeated until the measured window is at least this long
    # one more untimed solve under torch.profiler: its kernels, FLOPs and bytes read (sweep.energy.counts)
    profile: bool = False

    field_rules: ClassVar[tuple[Rule, ...]] = (
        *TrackerBase.field_rules,
        choice("tracker.meter", ("auto", "none")),
        Rule("tracker.meter_window_s", "a finite number > 0", positive_finite),
        Rule("tracker.profile", "true or false", lambda v, c: isinstance(v, bool)),
    )

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """The hierarchy file and the tracker's overrides of it must load (sweep.energy.hierarchy)."""
        check_energy_config(cfg)

    def __post_init__(self) -> None:
        self.model = load_hierarchy(self.hierarchy, _plain(self.levels), _plain(self.ops_pj), self.bytes_per_float)

    def summarize(self, trace: Trace) -> TrackerReport:
        r = Reads.of([trace])  # for ARD and the cache's effective ARD
        return (
            ard_report(trace, r)
            .merge(cache_report(trace, self.cache_size_floats, self._cache, r))
            .merge(TrackerReport({"dmd": dmd(trace, self._dmd)}))
            .merge(bytedmd_report(trace, p=self._bytedmd))
            .merge(energy_report(trace, self.model, self._energy))
        )

    def measure(
        self, solve: Callable[[], Any], device: Any, clock: Callable[[], float]
    ) -> tuple[dict[str, float], dict[str, str]]:
        counts = {}
        if self.profile and device.backend == "torch":  # numpy runs no torch operation: nothing to count
            counts = profiled_counts(solve, str(device.torch_device).startswith("cuda"))
        if self.meter == "none":
            return counts, {"energy.meter": "none", "energy.meter_reason": "tracker.meter=none"}
        measured, tags = meter_solve(solve, device, clock, self.meter_window_s)
        return {**counts, **measured}, tags

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        return [
            {**a, "dmd": d, "bytedmd": b, **e}
            for a, d, b, e in zip(
                ard_each(traces),
                dmd_each(traces, self._dmd),
                bytedmd_each(traces, p=self._bytedmd),
                energy_each(traces, self.model, self._energy),
            )
        ]

    # the passes' memos, shared by the whole trace and its epochs
    @cached_property
    def _dmd(self) -> PerResult:
        return dmd_pass()

    @cached_property
    def _bytedmd(self) -> PerResult:
        return bytedmd_pass()

    @cached_property
    def _energy(self) -> PerResult:
        return energy_pass(self.model)

    @cached_property
    def _cache(self) -> PerResult:
        return cache_pass(self.cache_size_floats)
