"""The Pareto front of a search study (`hydra/sweeper=optuna` with several objectives, e.g. sweeps/tune_sgd.yaml):
the rows no other row beats on every objective. `python -m sweep.compare <study>` shows it, as a table and a
plot, when the preset declares `hydra.sweeper.objectives` (metric -> maximize | minimize)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from sweep.report.curves import axis_label
from sweep.report.figure import plt, save
from sweep.report.table import Comparison, Row

TRIAL_KEY = "extra.trial"  # sweeps/tune_sgd.yaml's hydra.sweeper.trial_key: a point is labelled by its trial


def _scores(row: "Row", objectives: dict[str, str]) -> list[float] | None:
    """The row's means, signed so that larger is better on every objective (None: one is missing)."""
    if not all(m in row.stats for m in objectives):
        return None
    return [row.stats[m].mean * (1 if d == "maximize" else -1) for m, d in objectives.items()]


def front(cmp: "Comparison", objectives: dict[str, str]) -> "Comparison":
    """The rows of `cmp` on the Pareto front, best first on the first objective."""
    scored = [(r, s) for r in cmp.rows if (s := _scores(r, objectives)) is not None]

    def dominated(s: list[float]) -> bool:
        return any(all(a >= b for a, b in zip(o, s)) and o != s for _, o in scored)

    rows = sorted((r for r, s in scored if not dominated(s)), key=lambda r: _scores(r, objectives), reverse=True)
    metrics = [m for m in (*objectives, "epochs") if m in cmp.metrics]  # the trade-off, not every column
    return dataclasses.replace(cmp, rows=rows, study=f"{cmp.study}: Pareto front", metrics=metrics, relative=[])


def plot_front(
    cmp: "Comparison", on_front: "Comparison", objectives: dict[str, str], path: Path, versus: Sequence[str] = ()
) -> Path:
    """Every finished row as a point of (second objective, first objective), the front joined and labelled; one
    more panel for each metric of `versus` (the first objective against it, the front's rows labelled)."""
    y, x = list(objectives)[:2]
    axes_x = [x, *(m for m in versus if m != x)]
    fig, axes = plt.subplots(1, len(axes_x), figsize=(6.4 * len(axes_x), 4.4), squeeze=False)
    for ax, xm in zip(axes[0], axes_x):
        pts = [(r.stats[xm].mean, r.stats[y].mean) for r in cmp.rows if xm in r.stats and y in r.stats]
        ax.scatter(
            [p[0] for p in pts], [p[1] for p in pts], color="0.6", label="trials" if TRIAL_KEY in cmp.keys else "runs"
        )
        best = sorted((r.stats[xm].mean, r.stats[y].mean, r) for r in on_front.rows if xm in r.stats)
        if xm == x:  # the front is a front against the second objective only: elsewhere its rows are only named
            ax.plot([b[0] for b in best], [b[1] for b in best], "o-", color="C3", drawstyle="steps-post",
                    label="Pareto front")  # fmt: skip
        for bx, by, r in best:
            label = f"#{r.key[TRIAL_KEY]}" if TRIAL_KEY in r.key else " ".join(r.key.values())
            ax.annotate(label, (bx, by), fontsize=6, xytext=(3, -9), textcoords="offset points")
        if pts and min(p[0] for p in pts) > 0 and max(p[0] for p in pts) / min(p[0] for p in pts) > 20:
            ax.set_xscale("log")
        ax.set_xlabel(f"{axis_label(cmp, xm)} ({objectives[xm]})" if xm in objectives else axis_label(cmp, xm))
        ax.set_ylabel(f"{axis_label(cmp, y)} ({objectives[y]})")
        ax.legend(fontsize=8)
        on = f"{len(best)} on the front" if xm == x else f"named: the {len(best)} on the {y}-{x} front"
        ax.set_title(f"{cmp.study}: {len(pts)} {'trials' if TRIAL_KEY in cmp.keys else 'rows'}, {on}")
    return save(fig, path)
