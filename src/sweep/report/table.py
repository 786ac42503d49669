"""A study's comparison as data and as text: per group of runs, mean ± std of each metric (`Stat`, `Row`),
rendered as a terminal table, Markdown or CSV (`Comparison`). Cells are formatted by the metric registry."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any, Sequence

from rich import box
from rich.table import Table

from sweep.metrics import fmt

# A batched run's wall-clock is its batch's solve divided by the batch's runs (sweep.batch.run): the runs of a
# batch share one value, so its mean and std are not those of runs timed alone.
SHARED = ("wall_clock_s", "cost_usd")
BATCH_MARK = "(b)"
BATCH_NOTE = (
    f"{BATCH_MARK}: runs solved together in batches: wall_clock_s and cost_usd are each run's share of its batch"
)
# a row some of whose runs were batched and some solved alone (a sweep resumed over a single run): its mean mixes
# batch shares with whole solves, so it is not marked as a batch's (it was, as if every run were)
MIXED_MARK = "(b some)"
MIXED_NOTE = (
    f"{MIXED_MARK}: some of the row's runs solved in batches, the others alone: wall_clock_s and cost_usd mix "
    "batch shares with whole solves"
)


@dataclass
class Stat:
    mean: float
    std: float
    n: int

    def fmt(self, metric: str, short: bool = False) -> str:
        """'mean ± std' in the metric's format; `short`: a std in significant digits keeps two of them (the
        terminal table's width; the artifacts keep every digit)."""
        spec = fmt(metric)
        s = spec.format(self.mean)
        std = "{:.2g}" if short and spec.endswith("g}") else spec
        return s if self.n < 2 else f"{s} ± {std.format(self.std)}"


@dataclass
class Row:
    key: dict[str, str]  # swept key -> value
    finished: int
    total: int
    stats: dict[str, Stat] = field(default_factory=dict)
    failure: str = ""  # the last line of a failed child's error, when no child of the group finished
    relative: dict[str, str] = field(default_factory=dict)  # "<metric> <rule>" -> cell, against the baseline
    run_ids: list[str] = field(default_factory=list)  # the finished runs
    curves: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)  # curve -> (mean, std)
    per_seed: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> seed -> value (finished runs)
    paired: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> seed -> change vs the base's seed
    batched: int = 0  # finished runs solved together (hydra.launcher.batch): their wall_clock_s is a batch's share
    reached: int | None = None  # finished runs that reached method.target_accuracy (None: no target to read)

    @property
    def converged(self) -> bool | None:
        """Every finished run reached its target accuracy (None: unknown)."""
        return None if self.reached is None else self.reached == self.finished

    @property
    def batch_mark(self) -> str:
        """BATCH_MARK where every finished run was batched, MIXED_MARK where some were, else nothing."""
        return "" if not self.batched else BATCH_MARK if self.batched >= self.finished else MIXED_MARK

    def label(self, keys: Sequence[str], empty: str = "all") -> str:
        """The row by its values of `keys`: 'method=gf2 problem.n_bits=20' (`empty` when keys is empty)."""
        return " ".join(f"{k}={self.key[k]}" for k in keys) or empty


@dataclass
class Comparison:
    study: str
    parent_id: str
    experiment: str
    keys: list[str]
    metrics: list[str]
    rows: list[Row]
    relative: list[str] = field(default_factory=list)  # the "<metric> <rule>" columns, after the metrics
    proxies: str = ""  # the proxy ranking (sweep.energy.proxies), as Markdown, when the preset asks for one
    front: "Comparison | None" = None  # a search study's Pareto front (sweep.report.pareto)
    key_metrics: list[str] = field(default_factory=list)  # the terminal table's metrics (all when empty)
    change: dict[str, str] = field(default_factory=dict)  # metric -> how `Row.paired` reads it (a RELATIVE rule)
    logged: bool = False  # the files written were logged on the parent run (sweep.report.compare)
    unwritten: str = ""  # why the files could not be written (the table is shown all the same)
    deleted: int = 0  # the sweep's runs deleted in MLflow (its UI, `mlflow runs delete`): not counted, said so
    common: dict[str, str] = field(default_factory=dict)  # each `<group>.name` every run shares (not swept)

    @property
    def paired(self) -> bool:
        """Arms set against a baseline over the same seeds (two or more): the plot shows per-seed changes."""
        return any(len(v) > 1 for r in self.rows for v in r.paired.values())

    # -- renderings -------------------------------------------------------------------------------
    def header(self) -> list[str]:
        return [*self.keys, "runs", *self.metrics, *self.relative]

    def cells(self, row: Row) -> list[str]:
        out = [row.key[k] for k in self.keys] + [f"{row.finished}/{row.total}"]
        out += [self.stat_cell(row, m) for m in self.metrics]
        out += [row.relative.get(c, "-") for c in self.relative]
        return out

    @staticmethod
    def stat_cell(row: Row, metric: str, short: bool = False) -> str:
        """mean ± std; a batched row's wall-clock marked as its batch's share (BATCH_NOTE)."""
        if metric not in row.stats:
            return "-"
        cell = row.stats[metric].fmt(metric, short)
        return f"{cell} {row.batch_mark}" if row.batched and metric in SHARED else cell

    def notes(self, shown: Sequence[str] | None = None) -> list[str]:
        """What a reader needs under the table: the batch mark's meaning (where a column `shown`, every metric's
        by default, carries the mark: tiled_w1's terminal table has none), the groups where no run finished."""
        marked = set(SHARED) & set(self.metrics if shown is None else shown)
        marks = {r.batch_mark for r in self.rows} if marked else set()
        out = [note for mark, note in ((BATCH_MARK, BATCH_NOTE), (MIXED_MARK, MIXED_NOTE)) if mark in marks]
        out += [f"{r.label(self.keys)}: {r.failure} (no finished run)" for r in self.rows if r.failure]
        if self.deleted:  # without it, a sweep of two jobs, one deleted, read as one job (its swept column gone)
            out.append(
                f"{self.deleted} run(s) of this sweep deleted in MLflow are not counted (restore them in its UI, or "
                "`mlflow runs restore`, to count them)"
            )
        return out

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.header()) + " |", "|" + "---|" * len(self.header())]
        lines += ["| " + " | ".join(self.cells(r)) + " |" for r in self.rows]
        if self.notes():
            lines += ["", *(f"- {n}" for n in self.notes())]
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        """Machine-readable: one column per mean, std and count."""
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(
            [
                *self.keys,
                "finished",
                "total",
                *[f"{m}_{s}" for m in self.metrics for s in ("mean", "std", "n")],
                *self.relative,
                "failure",
            ]
        )
        for r in self.rows:
            vals: list[Any] = []
            for m in self.metrics:
                st = r.stats.get(m)
                vals += [st.mean, st.std, st.n] if st else ["", "", 0]
            vals += [r.relative.get(c, "") for c in self.relative]
            w.writerow([*(r.key[k] for k in self.keys), r.finished, r.total, *vals, r.failure])
        return buf.getvalue()

    def rich_table(self, wide: bool = False):
        """The terminal table: the study's key metrics, each with its column against the baseline beside it, under
        two-line headers, so that it fits 120 columns; `wide`: every column of the Markdown table."""
        if wide:
            t = Table(title=f"{self.study}  (parent run {self.parent_id}, experiment {self.experiment})")
            for h in self.header():
                t.add_column(h, justify="left" if h in self.keys else "right", no_wrap=True)  # whole, as the files
            for r in self.rows:
                t.add_row(*self.cells(r), style="red" if r.finished == 0 else None)
            return t
        title = self.study  # not the run's ids, which would set the width of a narrow table (printed apart)
        columns = self.terminal_columns()
        # every group finished all its runs, as many as the others: the count goes to the title
        counts = {(r.finished, r.total) for r in self.rows}
        runs = len(counts) > 1 or any(f != n for f, n in counts)
        if not runs and counts:
            n = counts.pop()[0]
            title += f": mean ± std over {n} runs per row" if n > 1 else ": one run per row"
        body = []
        for r in self.rows:
            cells = [r.key[k] for k in self.keys] + ([f"{r.finished}/{r.total}"] if runs else [])
            cells += [
                (
                    r.relative.get(c, "-").replace("baseline", "base")
                    if c in self.relative
                    else self.stat_cell(r, c, short=True)
                )
                for c in columns
            ]
            body.append(cells)
        # a relative column sits right of its metric: its rule names it ("vs base", "speed-up")
        heads = [
            *self.keys,
            *(["runs"] if runs else []),
            *(c.split(" ", 1)[1].replace(" ", "\n") if c in self.relative else c for c in columns),
        ]
        # at least as wide as its title: a sweep whose every run failed has a lone `runs` column, and its title
        # ("allfail") wrapped to that column's four characters ("allf" / "ail")
        t = Table(
            title=title,
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
            min_width=len(title),
        )
        for i, h in enumerate(heads):
            width = max((len(b[i]) for b in body), default=0)
            t.add_column(_header(h, width), justify="left" if i < len(self.keys) else "right", no_wrap=True)
        for r, cells in zip(self.rows, body):
            t.add_row(*cells, style="red" if r.finished == 0 else None)
        return t

    def terminal_columns(self) -> list[str]:
        """The metric and relative columns of the terminal table: each key metric, then its relative column."""
        keep = [m for m in self.key_metrics if m in self.metrics] or self.metrics
        return [c for m in keep for c in (m, *(r for r in self.relative if r.split(" ", 1)[0] == m))]

    def values(self, metric: str, **where: str) -> list[tuple[Row, Stat]]:
        """(row, stat) for rows whose keys match `where` (keys absent from the table are ignored)."""
        out = []
        for r in self.rows:
            if all(r.key.get(k, v) == v for k, v in where.items()) and metric in r.stats:
                out.append((r, r.stats[metric]))
        return out


def _header(name: str, width: int) -> str:
    """A column name on lines no wider than its cells where it can: 'method.hidden' -> 'method' / 'hidden' (a
    config group above its key), and a part wider than the cells broken once at its most even '_'
    ('cache_' / 'hit_rate')."""
    lines = []
    for part in name.split("."):
        cuts = [i + 1 for i, ch in enumerate(part[:-1]) if ch == "_"]
        if len(part) > width and cuts:
            cut = min(cuts, key=lambda i: max(i, len(part) - i))
            lines += [part[:cut], part[cut:]]
        else:
            lines.append(part)
    return "\n".join(lines)
