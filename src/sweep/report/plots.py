"""The plot that fits each study, from a `sweep.report.compare.Comparison` (matplotlib, Agg: no display needed)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Callable, Sequence

from sweep.energy.proxies import Ranking, finite
from sweep.metrics import PLOT
from sweep.metrics import label as metric_label
from sweep.record.tags import METHOD_PARAM
from sweep.report.figure import integer_ticks, legend, plt, save, style
from sweep.report.table import Comparison, Row


def _num(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


def _annotate_failures(ax, cmp: "Comparison") -> None:
    notes = [f"{' '.join(r.key.values())}: {r.failure}" for r in cmp.rows if r.failure]
    if notes:
        ax.text(
            0.01,
            0.01,
            "no finished run:\n" + "\n".join(n[:110] for n in notes[:6]),
            transform=ax.transAxes,
            fontsize=7,
            color="firebrick",
            va="bottom",
        )


# -- tiled_w1 (seed 003): ARD, hit rate and energy vs tile size, accuracy at the smaller width -----
TILED_LABELS = {"tiled": "tiled W1", "tiled_fused": "tiled W1, per-tile backward", "tiled_w2": "tiled W1 + W2"}


def plot_tiled(cmp: "Comparison", path: Path) -> Path:
    return save(tiled_figure(cmp), path)


def tiled_figure(cmp: "Comparison"):
    """ARD, hit rate and energy at the larger width, accuracy at the smaller, against tile size. A paired study
    (the arms over the baseline's seeds) shows each seed's change against the untiled step of the same seed:
    the seeds' spread (a traced step that stops early on one seed) would hide an effect of a few percent."""
    hiddens = sorted({_num(r.key["method.hidden"]) for r in cmp.rows} - {None}) if "method.hidden" in cmp.keys else []
    panels = [(m, hiddens[-1] if hiddens else None) for m in ("ard", "cache_hit_rate", "energy_pj") if m in cmp.metrics]
    if "accuracy" in cmp.metrics:
        panels.append(("accuracy", hiddens[0] if hiddens else None))
    cols = 2 if len(panels) == 4 else max(len(panels), 1)
    rows = -(-max(len(panels), 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.8 * rows), squeeze=False)
    for ax, (metric, hidden) in zip(axes.flat, panels):
        where = {} if hidden is None else {"method.hidden": _fmt_like(cmp, "method.hidden", hidden)}
        base, lines = [], {}  # the untiled baseline (tile size 0); one line per tiled variant
        for row, st in cmp.values(metric, **where):
            size = _num(row.key.get("variant.tile_size", "-"))
            if size:
                lines.setdefault(row.key.get("variant.name", "tiled"), []).append((size, row, st))
            else:
                base.append((row, st))
        for i, (name, pts) in enumerate(sorted(lines.items())):
            pts.sort(key=lambda t: t[0])
            xs = [t[0] for t in pts]
            dodge = 1.05 ** (i - (len(lines) - 1) / 2)  # side by side on the log axis, so every error bar shows
            dodged = [x * dodge for x in xs]
            if cmp.paired:
                _paired_line(ax, dodged, [t[1] for t in pts], metric, f"C{i}", TILED_LABELS.get(name, name))
            else:
                ax.errorbar(
                    dodged,
                    [t[2].mean for t in pts],
                    yerr=[t[2].std for t in pts],
                    marker="o",
                    capsize=3,
                    label=TILED_LABELS.get(name, name),
                )
            ax.set_xscale("log")
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.minorticks_off()
        title = metric_label(metric) + (f" (hidden={hidden:g})" if hidden is not None else "")
        if cmp.paired:
            rule = cmp.change.get(metric, "")
            ax.axhline(1 if rule == "speedup" else 0, color="gray", ls="--", label="untiled, same seed")
            ax.plot([], [], color="gray", lw=0.8, alpha=0.6, label="each seed")
            _paired_axis(ax, rule, metric_label(metric))
            title += "".join(f"\nuntiled: {st.fmt(metric)}" for _, st in base[:1])
        else:
            for _, st in base[:1]:
                ax.axhline(st.mean, color="gray", ls="--", label="baseline (untiled)")
                if st.std:
                    ax.axhspan(st.mean - st.std, st.mean + st.std, color="gray", alpha=0.15)
            ax.set_ylabel(metric_label(metric))
        ax.set_xlabel("tile size (hidden units)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"{cmp.study}: each tiled variant against the untiled step of the same seed (thin: each seed, "
        "marker: their mean)"
        if cmp.paired
        else f"{cmp.study}: tiled variants vs baseline (mean ± std over seeds)",
        fontsize=10,
    )
    return fig


# The y axis of a paired plot, by the study's relative rule for the metric (sweep.report.grouping.change).
CHANGE_LABELS = {"percent": "{}: % change vs base", "speedup": "{}: speed-up, base / arm", "difference": "{} - base"}


def _paired_axis(ax, rule: str, label: str) -> None:
    """The y label of a paired panel; an axis whose changes are all nil spans a little around it (not 1e-17)."""
    ax.set_ylabel(CHANGE_LABELS.get(rule, CHANGE_LABELS["difference"]).format(label))
    lo, hi = ax.get_ylim()
    if hi - lo < 1e-9:
        mid = (lo + hi) / 2
        ax.set_ylim(mid - 0.01 * max(abs(mid), 1), mid + 0.01 * max(abs(mid), 1))
    ax.ticklabel_format(axis="y", useOffset=False)


def _paired_line(ax, xs: list[float], rows: list["Row"], metric: str, color: str, label: str) -> None:
    """One arm's per-seed changes against the baseline (a thin line per seed, its points at `xs`) and their mean
    (markers): the lines' data are the changes themselves (gid = the seed)."""
    seeds = sorted({seed for r in rows for seed in r.paired.get(metric, {})})
    for seed in seeds:
        pts = [(x, r.paired[metric][seed]) for x, r in zip(xs, rows) if seed in r.paired.get(metric, {})]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, lw=0.8, alpha=0.45, marker=".", ms=3, gid=seed)
    means = [(x, statistics.fmean(r.paired[metric].values())) for x, r in zip(xs, rows) if r.paired.get(metric)]
    ax.plot([p[0] for p in means], [p[1] for p in means], color=color, lw=1.6, marker="o", label=label, gid="mean")


def _fmt_like(cmp: "Comparison", key: str, value: float) -> str:
    """The table's string for a numeric key value (params are strings: '1000', not '1000.0')."""
    for r in cmp.rows:
        if _num(r.key[key]) == value:
            return r.key[key]
    return str(value)


# -- gpu_vs_cpu (seed 000): wall-clock per method and device, and the GPU/CPU ratio ----------------
CPU_DEVICES = ("cpu", "torch_cpu")  # the devices (conf/device/) that run on this machine's CPU, by preference


def plot_devices(cmp: "Comparison", path: Path) -> Path:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    unswept = cmp.common.get("device.name", "cpu")  # the runs' own device where the sweep did not vary it

    def device(row: Any) -> str:
        return row.key.get("device.name", unswept)

    methods = sorted({r.key.get(METHOD_PARAM, "all") for r in cmp.rows})
    devices = sorted({device(r) for r in cmp.rows})
    width = 0.8 / max(len(devices), 1)
    times: dict[tuple[str, str], float] = {}
    labelled: set[str] = set()
    for j, dev in enumerate(devices):
        for i, m in enumerate(methods):
            hits = [
                st
                for row, st in cmp.values("wall_clock_s")
                if row.key.get(METHOD_PARAM, "all") == m and device(row) == dev
            ]
            if hits:
                times[(m, dev)] = hits[0].mean
                ax.bar(
                    i + j * width,
                    hits[0].mean,
                    width,
                    yerr=hits[0].std,
                    capsize=3,
                    color=f"C{j}",
                    label=None if dev in labelled else dev,
                )
                labelled.add(dev)
    ax.set_xticks([i + width * (len(devices) - 1) / 2 for i in range(len(methods))], methods)
    ax.set_yscale("log")
    ax.set_ylabel(metric_label("wall_clock_s"))
    ax.set_title("solve wall-clock per method")
    ax.legend()
    # the CPU a GPU is set against: the study's numpy cpu, else the same torch code on the CPU (`device=torch_cpu`,
    # the README's stand-in for a GPU: `device=torch_cpu,cuda` drew no ratio, the panel knew only `cpu`)
    cpu = next((d for d in CPU_DEVICES if d in devices), "cpu")
    gpu = next((d for d in devices if d not in CPU_DEVICES), None)
    ratios = [
        (m, times[(m, gpu)] / times[(m, cpu)])
        for m in methods
        if gpu and (m, gpu) in times and (m, cpu) in times and times[(m, cpu)] > 0
    ]
    if ratios:
        ax2.bar([m for m, _ in ratios], [v for _, v in ratios], color="C3")
        for i, (_, v) in enumerate(ratios):
            ax2.text(i, v, f"{v:.3g}x", ha="center", va="bottom")
        ax2.axhline(1, color="gray", ls="--")
        ax2.set_yscale("log")
    else:
        lacking = cpu if any((m, gpu) in times for m in methods) else gpu or "GPU"
        ax2.text(0.5, 0.6, f"no GPU/CPU ratio: no finished {lacking} runs", ha="center", transform=ax2.transAxes)
    ax2.set_ylabel(f"{gpu or 'GPU'} / {cpu} wall-clock")
    ax2.set_title("GPU/CPU time ratio per method")
    _annotate_failures(ax2, cmp)
    fig.suptitle(f"{cmp.study}: mean ± std over repeats")
    return save(fig, path)


# -- ard_variants (seed 001): ARD per training variant ---------------------------------------------
def plot_variants(cmp: "Comparison", path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    vals = [(r.key.get("variant.name", "?"), st) for r, st in cmp.values("ard")]
    ax.bar(
        [v for v, _ in vals],
        [st.mean for _, st in vals],
        yerr=[st.std for _, st in vals],
        capsize=3,
        color=[f"C{i}" for i in range(len(vals))],
    )
    for i, (_, st) in enumerate(vals):
        ax.text(i, st.mean, f"{st.mean:,.0f}", ha="center", va="bottom")
    ax.set_ylabel(metric_label("ard"))
    ax.set_title(f"{cmp.study}: ARD per variant")
    return save(fig, path)


# -- anything else: each metric against the swept keys ---------------------------------------------
def _key_label(row: "Row", keys: list[str]) -> str:
    return row.label(keys, empty="")  # no keys left: the line is named by its metric


def plot_default(
    cmp: "Comparison",
    path: Path,
    metrics: list[str] | None = None,
    log: bool = False,
    label: Callable[["Row", list[str]], str] = _key_label,
) -> Path:
    return save(default_figure(cmp, metrics, log, label), path)


def default_figure(
    cmp: "Comparison",
    metrics: list[str] | None = None,
    log: bool = False,
    label: Callable[["Row", list[str]], str] = _key_label,
):
    """Each metric against the last numeric swept key (an axis), one line per value of the others; a paired
    study: each arm's change against the baseline's same seed."""
    metrics = metrics or [m for m in PLOT if m in cmp.metrics][:4] or ["accuracy"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.4 * len(metrics), 3.8), squeeze=False)
    numeric = [k for k in cmp.keys if all(_num(r.key[k]) is not None for r in cmp.rows)]
    x_key = numeric[-1] if numeric else None  # a numeric key is an axis; the others name the lines
    lines = list(dict.fromkeys(label(r, [k for k in cmp.keys if k != x_key]) or m for r in cmp.rows for m in metrics))
    for ax, metric in zip(axes[0], metrics):
        paired = cmp.paired and any(r.paired.get(metric) for r in cmp.rows)
        if log and not paired:
            ax.set_yscale("log")
        if paired:  # each arm's change against the baseline's same seed
            rows = [r for r, _ in cmp.values(metric) if r.paired.get(metric)]
            for name, group in _by_label(rows, [k for k in cmp.keys if k != x_key], label, metric).items():
                xs = [_num(r.key[x_key]) for r in group] if x_key else [rows.index(r) for r in group]
                _paired_line(ax, xs, group, metric, style(lines.index(name))["color"], name)  # type: ignore[arg-type]
            rule = cmp.change.get(metric, "")
            ax.axhline(1 if rule == "speedup" else 0, color="gray", ls="--", lw=0.8)
            _paired_axis(ax, rule, metric_label(metric))
            if x_key:
                ax.set_xlabel(x_key)
                integer_ticks(ax, [_num(r.key[x_key]) for r in rows])
            else:
                ax.set_xticks(
                    range(len(rows)), [" ".join(r.key.values()) for r in rows], rotation=30, ha="right", fontsize=8
                )
            legend(ax)
        elif x_key:
            series: dict[str, list[tuple[float, float, float]]] = {}
            for row, st in cmp.values(metric):
                name = label(row, [k for k in cmp.keys if k != x_key]) or metric
                series.setdefault(name, []).append((_num(row.key[x_key]), st.mean, st.std))  # type: ignore
            for name, pts in series.items():
                pts.sort()
                ax.errorbar(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    yerr=[p[2] for p in pts],
                    capsize=3,
                    label=name,
                    **style(lines.index(name)),
                )  # one colour and marker per arm
            ax.set_xlabel(x_key)
            integer_ticks(ax, [p[0] for pts in series.values() for p in pts])
            if len(series) > 1:
                legend(ax)
        else:
            vals = cmp.values(metric)
            labels = [" ".join(r.key.values()) or "all" for r, _ in vals]
            ax.bar(range(len(vals)), [st.mean for _, st in vals], yerr=[st.std for _, st in vals], capsize=3)
            ax.set_xticks(range(len(vals)), labels, rotation=30, ha="right", fontsize=8)
        if not paired:
            ax.set_ylabel(metric_label(metric))
    _annotate_failures(axes[0][-1], cmp)
    fig.suptitle(
        f"{cmp.study}: each arm against the baseline's same seed (thin: each seed, marker: their mean)"
        if cmp.paired
        else f"{cmp.study}: mean ± std over seeds/repeats"
    )
    return fig


def _by_label(
    rows: list["Row"], keys: list[str], label: Callable[["Row", list[str]], str], metric: str
) -> dict[str, list["Row"]]:
    out: dict[str, list["Row"]] = {}
    for r in rows:
        out.setdefault(label(r, keys) or metric, []).append(r)
    return out


# -- torch_overhead (seed 004): steady-state and warm-up seconds against width, one line per arm ------------
def _arm_label(row: "Row", keys: list[str]) -> str:
    """An arm by what it changes: 'torch_cpu compile max-autotune', 'torch_cpu float16', 'cpu'."""
    first = sorted(keys, key=lambda k: k != "device.name")  # the device, then what the arm turns on
    words = [k.split(".")[-1] if row.key[k] == "True" else row.key[k] for k in first]
    return " ".join(w for w in words if w not in ("False", "none", "default"))


def plot_overhead(cmp: "Comparison", path: Path) -> Path:
    return plot_default(cmp, path, metrics=["wall_clock_s", "warmup_s"], log=True, label=_arm_label)


STUDY_PLOTS: dict[str, Callable[["Comparison", Path], Path]] = {
    "tiled_w1": plot_tiled,
    "gpu_vs_cpu": plot_devices,
    "ard_variants": plot_variants,
    "torch_overhead": plot_overhead,
}


def plot_comparison(cmp: "Comparison", path: Path) -> Path:
    """Write the study's plot to `path` (PNG): by study name, else by what was swept."""
    fn = STUDY_PLOTS.get(cmp.study)
    if fn is None:
        if "variant.tile_size" in cmp.keys:
            fn = plot_tiled
        elif "device.name" in cmp.keys:
            fn = plot_devices
        elif cmp.keys == ["variant.name"] and "ard" in cmp.metrics:
            fn = plot_variants
        else:
            fn = plot_default
    return fn(cmp, path)


# -- energy_proxies: each proxy against the energy, one log-log panel per proxy ------------------------
def plot_proxies(rankings: Sequence[Ranking], proxies: Sequence[str], path: Path, title: str) -> Path:
    """A grid: one row per (group, target), one log-log panel per proxy (proxy on x, target on y)."""
    rows = max(len(rankings), 1)
    fig, axes = plt.subplots(rows, len(proxies), figsize=(3.0 * len(proxies), 2.8 * rows), squeeze=False)
    for i, rk in enumerate(rankings):
        for j, p in enumerate(proxies):
            ax = axes[i][j]
            xy = [(pt.proxies[p], pt.target) for pt in rk.points if finite(pt.proxies[p]) and pt.proxies[p] > 0]
            if xy:
                ax.scatter(*zip(*xy), s=10, alpha=0.7)
                ax.set_xscale("log")
                ax.set_yscale("log")
            rho = rk.spearman.get(p, math.nan)
            ax.set_title(f"{p}: rho {rho:+.2f}" if math.isfinite(rho) else p, fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{rk.target}\n({rk.group})", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10)
    return save(fig, path)
