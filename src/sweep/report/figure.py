"""What every plot of a study shares: matplotlib without a display, an arm's colour and marker, a legend that covers
no panel, integer keys ticked at their values, and the figure saved whole."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # headless: CI and ssh sessions have no display
import matplotlib.pyplot as plt  # noqa: E402

from sweep.report import whole  # noqa: E402

__all__ = ["plt", "style", "legend", "integer_ticks", "save"]

# An arm's style: ten colours, then the same colours with another marker, so that no two arms of a study share
# one (matplotlib's cycle repeats after ten).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LEGEND_INSIDE = 6  # more entries than this: the legend goes beside the panels, where it covers none


def style(i: int) -> dict:
    """The i-th arm's colour and marker."""
    return {"color": f"C{i % 10}", "marker": MARKERS[(i // 10) % len(MARKERS)]}


def legend(ax, title: str | None = None) -> None:
    """The panel's legend: inside when short; else to its right, in columns of at most 20 entries."""
    n = len(ax.get_legend_handles_labels()[1])
    if n == 0:
        return
    if n <= LEGEND_INSIDE:
        ax.legend(fontsize=7, title=title, title_fontsize=7)
    else:
        ax.legend(
            fontsize=7, title=title, title_fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), ncol=-(-n // 20)
        )


def integer_ticks(ax, xs: Sequence[float | None]) -> None:
    """A key with integer values (k, n, a width) is ticked at its values, never between them (k = 3.5)."""
    values = sorted({x for x in xs if x is not None})
    if values and all(float(x).is_integer() for x in values) and len(values) <= 12:
        ax.set_xticks(values, [f"{x:g}" for x in values])
        ax.minorticks_off()


def save(fig, path: Path) -> Path:
    fig.tight_layout()
    try:  # a legend beside the panels is kept whole
        return whole.written(path, lambda p: fig.savefig(p, dpi=110, bbox_inches="tight"))
    finally:
        plt.close(fig)
