"""A study's comparison as data and as text: per group of runs, mean ± std of each metric (`Stat`, `Row`),
rendered as a terminal table, Markdown or CSV (`Comparison`). Cells are formatted by the metric registry."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Any, Sequence

from sweep.report.metrics import cell


@dataclass
class Stat:
    mean: float
    std: float
    n: int

    def fmt(self, metric: str) -> str:
        s = cell(metric, self.mean)
        return s if self.n < 2 else f"{s} ± {cell(metric, self.std)}"


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

    # -- renderings -------------------------------------------------------------------------------
    def header(self) -> list[str]:
        return [*self.keys, "runs", *self.metrics, *self.relative]

    def cells(self, row: Row) -> list[str]:
        out = [row.key[k] for k in self.keys] + [f"{row.finished}/{row.total}"]
        out += [row.stats[m].fmt(m) if m in row.stats else "-" for m in self.metrics]
        out += [row.relative.get(c, "-") for c in self.relative]
        return out

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.header()) + " |", "|" + "---|" * len(self.header())]
        lines += ["| " + " | ".join(self.cells(r)) + " |" for r in self.rows]
        notes = [f"- {r.label(self.keys)}: {r.failure}" for r in self.rows if r.failure]
        if notes:
            lines += ["", "Groups with no finished run:", *notes]
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        """Machine-readable: one column per mean, std and count."""
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow([*self.keys, "finished", "total",
                    *[f"{m}_{s}" for m in self.metrics for s in ("mean", "std", "n")], *self.relative, "failure"])
        for r in self.rows:
            vals: list[Any] = []
            for m in self.metrics:
                st = r.stats.get(m)
                vals += [st.mean, st.std, st.n] if st else ["", "", 0]
            vals += [r.relative.get(c, "") for c in self.relative]
            w.writerow([*(r.key[k] for k in self.keys), r.finished, r.total, *vals, r.failure])
        return buf.getvalue()

    def rich_table(self):
        from rich.table import Table  # noqa: PLC0415 - rich: only when stderr is a terminal

        t = Table(title=f"{self.study}  (parent run {self.parent_id}, experiment {self.experiment})")
        for h in self.header():
            t.add_column(h, justify="left" if h in self.keys else "right")
        for r in self.rows:
            t.add_row(*self.cells(r), style="red" if r.finished == 0 else None)
        return t

    def values(self, metric: str, **where: str) -> list[tuple[Row, Stat]]:
        """(row, stat) for rows whose keys match `where` (keys absent from the table are ignored)."""
        out = []
        for r in self.rows:
            if all(r.key.get(k, v) == v for k, v in where.items()) and metric in r.stats:
                out.append((r, r.stats[metric]))
        return out
