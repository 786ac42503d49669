"""Per-epoch diagnostics of a trained network, kept out of the timed loop.

Computing train accuracy on the whole training set every epoch costs more than the epoch's SGD steps at
n=20 (1000 samples x 200 hidden units, while a step touches 32). The log therefore stores a copy of the
weights each epoch (a few microseconds) and evaluates the curves after the clock has stopped
(``Outcome.evaluate``). Past a memory budget it evaluates inline instead, so huge runs cannot exhaust memory.
"""

from __future__ import annotations

from typing import Any, Callable

from sweep.trace.trace import numel

Measure = Callable[[dict[str, Any]], dict[str, float]]  # params -> {curve name: value}


BUDGET_FLOATS = 20_000_000  # snapshots kept for evaluation after the clock (sweep.config.memory counts them too)


class EpochLog:
    def __init__(self, budget_floats: int = BUDGET_FLOATS) -> None:
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

    def keep_row(self, snapshot: dict[str, Any], row: int, measure: Measure) -> None:
        """record for one of R runs solved together (methods/batched.py): ``snapshot`` is a copy of all the runs'
        weights, made once an epoch and owned by the logs from then on; this run's weights are its ``row``. The
        row is sliced when evaluated: per run and epoch only a reference is kept (on a GPU a copy per run was
        thousands of small kernels an epoch)."""
        size = sum(numel(v) for v in snapshot.values()) // next(iter(snapshot.values())).shape[0]
        if self.used + size <= self.budget:
            self.used += size
            self.entries.append((Row(snapshot, row), measure))
        else:
            self.entries.append(measure({k: v[row] for k, v in snapshot.items()}))

    def curves(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for e in self.entries:
            values = e[1](e[0].params() if isinstance(e[0], Row) else e[0]) if isinstance(e, tuple) else e
            for k, v in values.items():
                out.setdefault(k, []).append(float(v))
        return out


class Row:
    """Row ``row`` of a snapshot of many runs' weights, sliced only when evaluated (EpochLog.keep_row)."""

    __slots__ = ("snapshot", "row")

    def __init__(self, snapshot: dict[str, Any], row: int) -> None:
        self.snapshot, self.row = snapshot, row

    def params(self) -> dict[str, Any]:
        return {k: v[self.row] for k, v in self.snapshot.items()}


def hidden_progress(xp, p: dict[str, Any], p0: dict[str, Any], names: tuple[str, ...]) -> dict[str, float]:
    """Seed 002's hidden progress ||w_t - w_0||_1: per weight matrix (hidden_progress_<name>) and summed over
    them (hidden_progress). It grows while accuracy is still flat (grokking)."""
    each = {f"hidden_progress_{k}": float(xp.sum(xp.abs(p[k] - p0[k]))) for k in names}
    return {"hidden_progress": sum(each.values()), **each}
