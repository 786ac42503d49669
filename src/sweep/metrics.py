"""The metric registry: which figures a run is compared on, in what order, with what label and format. The
compare table, its plots, the Pareto front, the proxy ranking, a run's one-line summary and the MLflow UI's
columns all read it, so a metric is described once.

A leaf module (it imports nothing of the project): the result record itself formats its line with it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str  # as logged (MLflow metric key)
    label: str  # axis and legend text
    fmt: str  # a table cell ("{:.3f}")
    line: str | None = None  # its format on a run's one-line summary; None: not on the line
    plot: bool = False  # one of the generic plot's default panels
    ui: bool = False  # a column of MLflow's runs view
    key: bool = False  # a study's key metric when its preset names none (compare's terminal table)
    # the tracker whose own figure this is: on a run's line only under that tracker (every tracker logs ard too)
    tracker: str | None = None


# Table order: the group's own columns (seed 001: reads, writes, total floats; dmc, dmd, ByteDMD, energy) beside
# accuracy, time and cost.
REGISTRY: tuple[Metric, ...] = (
    Metric("accuracy", "test accuracy", "{:.3f}", line="{:.3f}", plot=True, ui=True, key=True),
    # the character models (problem=chars): accuracy is of validation characters; their loss and training length
    Metric("bits_per_char", "validation bits per character", "{:.3f}", line="{:.3f}"),
    Metric("train_loss", "training loss (nats)", "{:.3f}"),
    Metric("epochs", "epochs", "{:.1f}", line="{:.0f}", plot=True, key=True),
    Metric("steps", "training steps", "{:,.0f}", line="{:.0f}"),
    Metric("wall_clock_s", "wall-clock (s)", "{:.4f}", line="{:.4f}s", plot=True, ui=True, key=True),
    Metric("tokens_per_s", "tokens per second", "{:,.0f}", line="{:,.0f}"),
    Metric("warmup_s", "warm-up (s)", "{:.4f}"),
    # a batched run (hydra.launcher.batch): its batch's whole solve; wall_clock_s is this over the batch's runs
    Metric("batch_wall_s", "batch solve wall-clock (s)", "{:.4f}"),
    Metric("ard", "ARD (floats)", "{:,.0f}", line="{:,.1f}", plot=True, ui=True, tracker="ard"),
    Metric("reads", "reads", "{:,.0f}"),
    Metric("writes", "writes", "{:,.0f}"),
    Metric("total_floats", "total_floats", "{:,.0f}"),
    Metric("dmc", "dmc", "{:,.0f}"),
    Metric("dmd", "dmd", "{:,.0f}", line="{:,.0f}", tracker="dmd"),
    Metric("bytedmd", "ByteDMD", "{:,.0f}", line="{:,.0f}", tracker="bytedmd"),
    # tracker.source=auto: values that left the traced arrays as Python values (work done outside the arrays)
    Metric("escaped", "escaped values", "{:,.0f}"),
    Metric("cache_hit_rate", "cache hit rate", "{:.3f}", line="{:.3f}", plot=True, tracker="cache"),
    Metric("energy_pj", "modelled energy (pJ)", "{:.4g}", line="{:.4g}", ui=True, tracker="energy"),
    # the solve's price: wall_clock_s x the device's hourly price (cuda: Modal's rate for device.gpu), the same
    # under every launcher
    Metric("cost_usd", "cost (USD)", "{:.3g}", line="${:.3g}", plot=True, ui=True),
    # the whole task's price: the seconds it was billed at the rate of where it ran (cpu_s, its process's CPU
    # seconds on a CPU host, x the device's price; billed_s, Modal's container seconds, x Modal's rate for
    # device.gpu or a CPU core); start-up and recording included
    Metric("task_cost_usd", "task cost (USD)", "{:.3g}"),
)
BY_NAME: dict[str, Metric] = {m.name: m for m in REGISTRY}
DEFAULT_FMT = "{:.4g}"  # a metric outside the registry

TABLE: tuple[str, ...] = tuple(m.name for m in REGISTRY)  # the compare table's columns, in order
LINE: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.line)  # a run's one-line summary
PLOT: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.plot)  # the generic plot's default panels
UI: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.ui)  # MLflow's runs view
KEY: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.key)  # a study's key metrics when its preset names none
TRACKER_FIGURES: dict[str, str] = {m.tracker: m.name for m in REGISTRY if m.tracker}  # a tracker's own figure


def label(name: str) -> str:
    """The metric's axis text (its name when it is not registered)."""
    m = BY_NAME.get(name)
    return m.label if m else name


def fmt(name: str) -> str:
    """The metric's table format."""
    m = BY_NAME.get(name)
    return m.fmt if m else DEFAULT_FMT


def cell(name: str, value: float) -> str:
    """The metric's value as a table cell."""
    return fmt(name).format(value)


def line(metrics: dict[str, float], tracker: str | None = None) -> list[str]:
    """`key=value` for each one-line-summary metric present, in registry order; of the trackers' figures, the
    run's tracker's own (`tracker`; None: not known, ard's)."""
    own = tracker if tracker in TRACKER_FIGURES else "ard"
    return [
        f"{k}=" + BY_NAME[k].line.format(metrics[k])  # type: ignore[union-attr]
        for k in LINE
        if k in metrics and BY_NAME[k].tracker in (None, own)
    ]
