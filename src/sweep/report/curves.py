"""Per-epoch (or per-evaluation) learning curves of a study: one line per arm whose curves differ, mean ± std
band over seeds (seed 002's grokking and hidden progress)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from sweep.metrics import label as metric_label
from sweep.report.figure import legend, plt, save, style
from sweep.report.table import Comparison, Row

CURVE_LABELS = {
    "test_accuracy": "accuracy (test)",
    "train_loss": "train loss",
    "test_loss": "test loss",
    "hidden_progress": "hidden progress ||w_t - w_0||_1",
}
DASHED = {"test_accuracy": "train_accuracy"}  # drawn dashed in the same panel (grokking: train fits first)
# the character models' curves (their points are evaluations: `eval_step`): the training loss is logged in nats
# (torch's cross-entropy), the validation loss in bits per character (sweep.methods.lm.train); both drawn in bits
# per character, so that the two panels are read on one scale
PER_EVALUATION = {
    "test_accuracy": ("validation character accuracy", 1.0),
    "train_loss": ("train loss (bits per character)", 1 / math.log(2)),
    "test_loss": ("validation loss (bits per character)", 1.0),
}


def axis_label(cmp: "Comparison", metric: str) -> str:
    """`metric`'s axis text in this comparison: the character models' `accuracy` (rows whose curves are per
    evaluation) is of validation characters, as their curves panel says; char_lm's front plot called the same
    figure "test accuracy". Any other metric, or a comparison of other runs: the registry's label."""
    per_evaluation = [("eval_step" in r.curves) for r in cmp.rows if r.curves]
    if metric == "accuracy" and per_evaluation and all(per_evaluation):
        return PER_EVALUATION["test_accuracy"][0]
    return metric_label(metric)


def plot_curves(cmp: "Comparison", path: Path) -> Path:
    return save(curves_figure(cmp), path)


def alike(cmp: "Comparison", names: Sequence[str]) -> list[tuple[str, "Row"]]:
    """The arms whose curves differ, each with its label: arms with the very same curves (tiling does not change
    the math: every tiled arm learns as the untiled one) are one line, named by its first arm and their count."""
    groups: dict[tuple, list["Row"]] = {}
    for row in cmp.rows:
        if any(n in row.curves for n in names):
            same = tuple((n, tuple(row.curves[n][0]), tuple(row.curves[n][1])) for n in names if n in row.curves)
            groups.setdefault(same, []).append(row)
    out = []
    for rows in groups.values():
        label = " ".join(rows[0].key.values()) or "all"
        out.append((label if len(rows) == 1 else f"{label} and {len(rows) - 1} more alike", rows[0]))
    return out


def curves_figure(cmp: "Comparison"):
    """Per-epoch curves, one line per arm whose curves differ (`alike`), each arm its own colour and marker, the
    legend beside the panels when it is long."""
    names = [n for n in CURVE_LABELS if any(n in r.curves for r in cmp.rows)]
    per = "evaluation" if any("eval_step" in r.curves for r in cmp.rows) else "epoch"
    fig, axes = plt.subplots(1, len(names), figsize=(4.4 * len(names), 3.8), squeeze=False)
    arms = alike(cmp, names)
    for ax, name in zip(axes[0], names):
        for i, (label, row) in enumerate(arms):
            if name not in row.curves:
                continue
            mean, std = row.curves[name]
            scale = PER_EVALUATION[name][1] if per == "evaluation" and name in PER_EVALUATION else 1.0
            mean, std = [m * scale for m in mean], [s * scale for s in std]
            epochs = row.curves["eval_step"][0][: len(mean)] if "eval_step" in row.curves else range(1, len(mean) + 1)
            look = style(i)
            every = max(len(mean) // 8, 1)
            ax.plot(epochs, mean, label=label, markevery=every, ms=4, **look)
            ax.fill_between(
                epochs,
                [m - s for m, s in zip(mean, std)],
                [m + s for m, s in zip(mean, std)],
                color=look["color"],
                alpha=0.2,
            )
            if DASHED.get(name) in row.curves:
                ax.plot(epochs, row.curves[DASHED[name]][0][: len(mean)], color=look["color"], ls="--", lw=0.8)
        ax.set_xlabel("training step" if per == "evaluation" else "epoch")
        label = PER_EVALUATION[name][0] if per == "evaluation" and name in PER_EVALUATION else CURVE_LABELS[name]
        dashed = DASHED.get(name)
        if dashed and any(dashed in r.curves for r in cmp.rows):
            label += f"; {dashed.split('_')[0]} dashed"
        ax.set_ylabel(label)
        if name == "hidden_progress":
            ax.set_yscale("log")
    legend(axes[0][-1], title=" ".join(cmp.keys) or None)
    fig.suptitle(f"{cmp.study}: per-{per} curves, mean ± std over seeds (a run that stopped keeps its last value)")
    return fig
