"""Per-epoch diagnostics of a trained network, kept out of the timed loop.

Computing train accuracy on the whole training set every epoch costs more than the epoch's SGD steps at
n=20 (1000 samples x 200 hidden units, while a step touches 32). The log therefore stores a copy of the
weights each epoch (a few microseconds) and evaluates the curves after the clock has stopped
(``Outcome.evaluate``). Past a memory budget it evaluates inline instead, so huge runs cannot exhaust memory.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from sweep.config.footprint import SNAPSHOT_BUDGET_FLOATS
from sweep.trace.trace import numel

Measure = Callable[[dict[str, Any]], dict[str, float]]  # params -> {curve name: value}
# (R runs' weights, their run ids) -> {curve name: (R,) values}: a Snapshot's evaluation
RowsMeasure = Callable[[dict[str, Any], Any], dict[str, Any]]


class EpochLog:
    def __init__(self, budget_floats: int = SNAPSHOT_BUDGET_FLOATS) -> None:
        self.budget = budget_floats
        self.used = 0
        self.entries: list[Any] = []  # (params copy, measure) or an evaluated {name: value}
        self.traces: list[Any] = []  # per-epoch traces (tracker.scope=all_steps)

    def record(self, p: dict[str, Any], measure: Measure) -> None:
        size = sum(numel(v) for v in p.values())
        if self.used + size <= self.budget:
            self.used += size
            self.entries.append(({k: v * 1.0 for k, v in p.items()}, measure))
        else:
            self.entries.append(measure(p))

    def keep_row(self, snapshot: "Snapshot", row: int) -> None:
        """record for one of R runs solved together (methods/batched.py): ``snapshot`` holds a copy of the weights
        of all the runs then training, made once an epoch; this run's are its ``row``. Only a reference is kept
        per run and epoch (on a GPU a copy per run was thousands of small kernels an epoch); past the budget the
        snapshot is evaluated at once, as record evaluates inline."""
        if self.used + snapshot.row_floats <= self.budget:
            self.used += snapshot.row_floats
            self.entries.append((snapshot, row))
        else:
            self.entries.append(snapshot.values(row))

    def curves(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for e in self.entries:
            values = (e[0].values(e[1]) if isinstance(e[0], Snapshot) else e[1](e[0])) if isinstance(e, tuple) else e
            for k, v in values.items():
                out.setdefault(k, []).append(float(v))
        return out


class Snapshot:
    """One epoch's copy of the weights of the runs then training (R runs solved together), evaluated for all of
    them at once by ``evaluate(arrays, ids)`` -> {curve name: (rows,) host array} when the first of them asks
    (after the clock); the copy is dropped once evaluated."""

    def __init__(self, arrays: dict[str, Any], ids: Any, evaluate: RowsMeasure) -> None:
        self.arrays: dict[str, Any] | None = arrays
        self.ids, self.evaluate = ids, evaluate
        self.row_floats = sum(numel(v) for v in arrays.values()) // max(1, len(ids))
        self._values: dict[str, Any] | None = None

    def values(self, row: int) -> dict[str, float]:
        if self._values is None:
            assert self.arrays is not None
            self._values, self.arrays = self.evaluate(self.arrays, self.ids), None
        return {k: float(v[row]) for k, v in self._values.items()}


def per_row(measure_of: Callable[[int], Measure]) -> RowsMeasure:
    """A snapshot's evaluation from one measure per run (``measure_of(run)``), applied row by row: the solo
    code on each run's own weights."""

    def evaluate(arrays: dict[str, Any], ids: Any) -> dict[str, Any]:
        rows = [measure_of(int(r))({k: v[j] for k, v in arrays.items()}) for j, r in enumerate(ids)]
        return {k: np.array([row[k] for row in rows]) for k in rows[0]}

    return evaluate


def hidden_progress(xp, p: dict[str, Any], p0: dict[str, Any], names: tuple[str, ...]) -> dict[str, float]:
    """Seed 002's hidden progress ||w_t - w_0||_1: per weight matrix (hidden_progress_<name>) and summed over
    them (hidden_progress). It grows while accuracy is still flat (grokking)."""
    each = {f"hidden_progress_{k}": float(xp.sum(xp.abs(p[k] - p0[k]))) for k in names}
    return {"hidden_progress": sum(each.values()), **each}
