"""The proxy study's report from its dataset (every file of docs/results/proxy_study/ read together): per device
(each GPU model; the CPU arm's machine) and for the CPU's cachegrind ground truth, each proxy's Spearman rho with
the target and its bootstrap 95% interval, the partial rank correlation given wall-clock, and the model of the
target from counts scored on held-out configurations (sweep.proxy_study.stats); a scatter grid, one panel per
proxy, each configuration's mean with its repeats' range. `sweep-compare proxy_study` prints it."""

from __future__ import annotations

import math
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from hydra_plugins.sweep_launcher.api import prog
from sweep.paths import PROJECT_ROOT, safe_name
from sweep.proxy_study import dataset
from sweep.proxy_study import stats as st

PROXIES = (
    "ard",
    "dmc",
    "dmd",
    "bytedmd",
    "energy_pj",
    "cache_miss_floats",
    "total_floats",
    "kernels",
    "profiled_flops",
    "profiled_read_bytes",
    "wall_clock_s",
)
CONTROL = "wall_clock_s"
CACHEGRIND = "cachegrind-*.csv"
# the ground truth's targets: the solve's data misses at each simulated level, all code and the arrays' share
CG_TARGETS = ("cg_d1_misses", "cg_ll_misses", "cg_d1_misses_arrays", "cg_ll_misses_arrays")


@dataclass
class Section:
    title: str
    target: str
    configs: list[str]
    runs: list[dict[str, str]]
    rho: dict[str, st.Interval] = field(default_factory=dict)
    partial: dict[str, st.Interval] = field(default_factory=dict)
    within: dict[str, st.Interval] = field(default_factory=dict)
    model: st.CountsModel | None = None
    excluded: list[str] = field(default_factory=list)


def group(config: str) -> str:
    """The configurations that do the same work in other ways: every sparse-parity variant at one width (h4000,
    "tiled h1000"), the gpt arms (one parameter count; the same tokens but for the shapes)."""
    m = re.search(r"h(\d+)", config)
    return f"h{m.group(1)}" if m else ("gpt" if "gpt" in config else config)


def level_features(runs: Sequence[dict[str, str]]) -> dict[str, list[float]]:
    """The counts a model is fitted from: a constant, kernels and FLOPs where the profiler gave them, and the floats
    each level of the trace's hierarchy served (reads + writes)."""
    keys = list(runs[0]) if runs else []
    out = {"per run": [1.0] * len(runs)}  # what a run costs whatever it does: start-up, the last sync
    out.update({k: dataset.column(runs, k) for k in ("kernels", "profiled_flops") if k in keys})
    for k in keys:
        if k.endswith("_reads") and not k.endswith("_per_step_reads") and k[: -len("_reads")] + "_writes" in keys:
            level = k[: -len("_reads")]
            r, w = dataset.column(runs, k), dataset.column(runs, level + "_writes")
            out[f"{level} floats"] = [a + b for a, b in zip(r, w)]
    return {k: v for k, v in out.items() if all(math.isfinite(x) for x in v)}


def analyse(title: str, rows: Sequence[dict[str, str]], target: str, key: str) -> Section:
    """One target over `rows` (configuration = the value of `key`): runs without a finite target are excluded."""
    runs, excluded = [], []
    for r in rows:
        bad = r.get("status", "FINISHED") != "FINISHED" or not math.isfinite(dataset.number(r.get(target)))
        if bad:
            why = r.get("error") or r.get("meter_reason") or f"no {target}"
            excluded.append(f"{r.get(key)} repeat={r.get('repeat', r.get('seed', ''))}: {why}")
        else:
            runs.append(r)
    configs = [r[key] for r in runs]
    sec = Section(title, target, configs, runs, excluded=excluded)
    y = dataset.column(runs, target)
    for p in PROXIES:
        x = dataset.column(runs, p)
        if sum(math.isfinite(v) for v in x) < 3:
            continue
        sec.rho[p] = st.rho_interval(configs, x, y)
        sec.within[p] = st.within_groups(configs, [group(c) for c in configs], x, y)
        if p != CONTROL:
            sec.partial[p] = st.partial_interval(configs, x, y, dataset.column(runs, CONTROL))
    if runs:
        sec.model = st.counts_model(configs, level_features(runs), y)
    return sec


def sections(directory: Path) -> tuple[list[Section], dict[str, int]]:
    """Every section of the dataset, and the runs each device holds (finished or not)."""
    slices = [r for r in dataset.read_all(directory) if not r["file"].startswith("cachegrind-")]
    held: dict[str, int] = {}
    for r in slices:
        held[r["device"]] = held.get(r["device"], 0) + 1
    out = []
    for device in sorted(held):
        rows = [r for r in slices if r["device"] == device]
        out.append(analyse(f"{device}: dynamic Joules (above idle)", rows, "energy_measured_j", "arm"))
    cg = dataset.read_all(directory, CACHEGRIND)
    if cg:
        where = cg[0].get("hierarchy", "")
        for t in CG_TARGETS:
            out.append(analyse(f"CPU cache simulator ({where}): {t}", cg, t, "config"))
    return out, held


def shares(cg: Sequence[dict[str, str]]) -> str:
    """Per ground-truth configuration: its solve's data misses and the array libraries' and the interpreter's
    shares of them (where the arrays' traffic dominates), and the spread over its seeds."""
    lines = [
        "| configuration | runs | D1 misses (min-max) | arrays' share D1 / LL | interpreter's share D1 / LL |",
        "|---|---|---|---|---|",
    ]
    for c in dict.fromkeys(r["config"] for r in cg):
        rs = [r for r in cg if r["config"] == c]
        d1 = dataset.column(rs, "cg_d1_misses")
        tot = {k: sum(dataset.column(rs, f"cg_{k}_misses")) for k in ("d1", "ll")}
        part = {
            (who, k): sum(dataset.column(rs, f"cg_{k}_misses_{who}")) / tot[k] if tot[k] else math.nan
            for who in ("arrays", "interpreter")
            for k in ("d1", "ll")
        }
        arrays, interp = (f"{part[who, 'd1']:.0%} / {part[who, 'll']:.0%}" for who in ("arrays", "interpreter"))
        lines.append(f"| {c} | {len(rs)} | {min(d1):,.0f}-{max(d1):,.0f} | {arrays} | {interp} |")
    return "\n".join(lines) + "\n"


def _cell(iv: st.Interval | None) -> str:
    return iv.cell() if iv is not None else "-"


def markdown(secs: Sequence[Section], held: dict[str, int], cg: Sequence[dict[str, str]] = ()) -> str:
    lines = []
    if held:
        lines.append("Runs held per device: " + ", ".join(f"{d}: {n}" for d, n in sorted(held.items())) + "\n")
    for s in secs:
        n_cfg = len(set(s.configs))
        lines += [
            f"### {s.title}",
            "",
            f"{len(s.runs)} runs, {n_cfg} configurations (the unit: each configuration's mean; intervals: bootstrap "
            "95% over configurations; at equal work: within groups of configurations that do the same work, "
            f"{', '.join(sorted(set(map(group, s.configs))))}).",
            "",
            "| proxy | Spearman rho [95%] | partial rho given wall-clock [95%] | rho at equal work [95%] |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {p} | {_cell(s.rho.get(p))} | {_cell(s.partial.get(p))} | {_cell(s.within.get(p))} |"
            for p in PROXIES
            if p in s.rho
        ]
        m = s.model
        if m is not None and m.features:
            coefs = ", ".join(f"{f} {c:.3g}" for f, c in zip(m.features, m.coef) if math.isfinite(c))
            err = f"{100 * m.mape:.1f}%" if math.isfinite(m.mape) else "not computable (too few configurations)"
            worst = f"; worst held out: {m.worst[0]} ({100 * m.worst[1]:.0f}%)" if math.isfinite(m.mape) else ""
            lines += ["", f"Counts model, {s.target} = sum of c x count (c >= 0): held-out MAPE {err}{worst}."]
            lines += [f"Fitted on all: {coefs}." if coefs else ""]
        if s.excluded:
            lines += ["", f"Excluded ({len(s.excluded)}): " + "; ".join(s.excluded[:8])]
        lines.append("")
    if cg:
        lines += ["### Whose misses: the solve's, by shared object (the rest: libc, libm, the loader)", "", shares(cg)]
    return wrapped("\n".join(lines))


def wrapped(text: str, width: int = 120) -> str:
    """The report's prose wrapped to the terminal's 120 columns; tables and headings as they are."""
    out = []
    for line in text.splitlines():
        keep = line.startswith(("|", "#")) or len(line) <= width
        out += [line] if keep else textwrap.wrap(line, width, break_on_hyphens=False)
    return "\n".join(out)


def plot(secs: Sequence[Section], path: Path) -> Path:
    """One row per section, one log-log panel per proxy: each configuration's mean, its repeats' range as bars."""
    from sweep.report.figure import plt, save  # noqa: PLC0415 - matplotlib: only when a plot is asked for

    secs = [s for s in secs if s.rho]
    cols = [p for p in PROXIES if any(p in s.rho for s in secs)]
    fig, axes = plt.subplots(
        max(len(secs), 1), max(len(cols), 1), figsize=(2.8 * len(cols), 2.6 * len(secs)), squeeze=False
    )
    for i, s in enumerate(secs):
        y = np.array(dataset.column(s.runs, s.target))
        for j, p in enumerate(cols):
            ax = axes[i][j]
            x = np.array(dataset.column(s.runs, p))
            for c in dict.fromkeys(s.configs):
                sel = np.array([k == c for k in s.configs]) & np.isfinite(x) & (x > 0) & (y > 0)
                if sel.any():
                    ys = y[sel]
                    ax.errorbar(
                        x[sel].mean(), ys.mean(), yerr=[[ys.mean() - ys.min()], [ys.max() - ys.mean()]], fmt="o", ms=3
                    )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{p}\n{_cell(s.rho.get(p))}", fontsize=7)
            ax.tick_params(labelsize=6)
            if j == 0:
                ax.set_ylabel(s.target, fontsize=7)
    fig.suptitle("proxy_study: each proxy against the target, rho [bootstrap 95%]", fontsize=9)
    return save(fig, path)


def study_report(directory: Path, out_dir: Path, draw: bool = True) -> tuple[str, list[Path]]:
    """The report's Markdown and the files written (proxy_study.md, the scatter grid) in `out_dir`."""
    secs, held = sections(directory)
    if not secs:
        raise LookupError(f"{directory}: no runs yet (python benchmarks/proxy_slice.py on a GPU, proxy_cachegrind.py)")
    text = markdown(secs, held, dataset.read_all(directory, CACHEGRIND))
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [out_dir / "proxy_study.md"]
    files[0].write_text("# proxy_study\n\n" + text)
    if draw:
        files.append(plot(secs, out_dir / "proxy_study.png"))
    return text, files


def dataset_study(study: str, directory: Path, out_dir: Path | None, draw: bool = True) -> int:
    """`sweep-compare <study>` for a study whose runs are CSV files (its preset's `compare.dataset`): the report
    printed and written to outputs/compare/<study>-dataset/ (or `out_dir`); exit 1 with one line when there is
    nothing to read or nowhere to write."""
    out_dir = out_dir or PROJECT_ROOT / "outputs" / "compare" / f"{safe_name(study)}-dataset"
    try:
        text, files = study_report(directory, out_dir, draw)
    except LookupError as e:
        print(f"{prog('sweep.compare')}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(
            f"{prog('sweep.compare')}: report not written: {e.filename or out_dir}: {e.strerror or e}", file=sys.stderr
        )
        return 1
    where = directory.relative_to(PROJECT_ROOT) if directory.is_relative_to(PROJECT_ROOT) else directory
    print(f"{study}: every file of {where}\n\n{text}")
    print("wrote " + ", ".join(str(f) for f in files))
    return 0
