"""The character challenge's leaderboard (`sweep-compare char_challenge`): the group's two framings, each entrant's
mean and 95% interval over its seeds, ties where intervals overlap, and the run-to-run spread.

An entrant is a `method.path`, with the runs of the latest round that ran it (sweep.report.leaderboard
`latest_entries`: one scorer, one corpus). Its figures per finished run: `accuracy` (the gated split's), and the
training energy in Joules: measured (`train_energy_measured_j`, a GPU's counter less the idle measured) or, where
none was measured, modelled (`energy_pj` where `energy_modelled` = 1: sweep.methods.char_model). A board ranks
one kind: measured where any entrant has it, else modelled; an entrant of the other kind is listed, not ranked.

- floor (`accuracy_floor`): mean accuracy at least the floor, ranked by mean training Joules, lowest first;
- budget (`energy_budget_j`, when set): mean Joules at most the budget, ranked by mean accuracy, highest first.
Out of both: a FAILED run (its reason: an error, training past `challenge.max_train_s`, a prediction that is not
a distribution), fewer than `min_seeds` finished runs, no energy figure. Two neighbours in a ranking whose 95%
intervals (Student's t over the seeds: scipy.stats) overlap are tied: they share a rank, marked "=".
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

from rich import box
from rich.table import Table

from sweep.report.leaderboard import Entry, Leaderboard, latest_entries, scorer_of
from sweep.report.leaderboard import _md as markdown_table
from sweep.report.path_cell import PathCell

CORPUS = ("problem.path", "problem.val_fraction", "method.score_chars")  # a round's texts: rounds compare on these
REFERENCES = "sweep.challenge."  # the project's own entrants (char_references, ngram)
MEASURED, MODELLED = "measured", "modelled"
MIN_SEEDS = 3


@dataclass
class Interval:
    """Mean and 95% interval (Student's t) of a figure over an entrant's seeds, and its coefficient of variation."""

    values: list[float]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def half(self) -> float:
        n = len(self.values)
        if n < 2:
            return math.inf
        from scipy import stats  # noqa: PLC0415 - scipy: seconds to import, only for a leaderboard

        return float(stats.t.ppf(0.975, n - 1) * statistics.stdev(self.values) / math.sqrt(n))

    @property
    def cv(self) -> float:
        return statistics.stdev(self.values) / abs(self.mean) if len(self.values) > 1 and self.mean else math.nan

    def overlaps(self, other: "Interval") -> bool:
        return abs(self.mean - other.mean) <= self.half + other.half

    def text(self, fmt: str) -> str:
        return f"{self.mean:{fmt}} ±{self.half:{fmt}}" if math.isfinite(self.half) else f"{self.mean:{fmt}}"


@dataclass
class CharEntry:
    entry: Entry
    accuracy: Interval
    joules: Interval
    kind: str  # measured | modelled | "" (no energy figure)
    fixed50: Interval  # what a fixed 50 W idle would have reported (measured runs)
    reasons: list[str] = field(default_factory=list)  # out of both rankings
    rank: dict[str, str] = field(default_factory=dict)  # framing -> rank label ("2=": tied)

    @property
    def label(self) -> str:
        """A reference by its name (`gpt`, `ngram`), another entrant by its path."""
        module, _, fn = self.entry.path.rpartition(":")
        if not module.startswith(REFERENCES):
            return self.entry.path
        return f"{fn if fn != 'train' else module.rpartition('.')[2]} (reference)"

    @property
    def seeds(self) -> str:
        return f"{self.entry.finished}/{len(self.entry.runs)}"


def energy_of(run: Any) -> tuple[float | None, str]:
    """(training Joules, kind) of a finished run: measured where its counter was read, else modelled."""
    m = run.data.metrics
    if "train_energy_measured_j" in m:
        return m["train_energy_measured_j"], MEASURED
    if m.get("energy_modelled") == 1.0 and "energy_pj" in m:
        return m["energy_pj"] * 1e-12, MODELLED
    return None, ""


def judge(e: Entry, min_seeds: int, failure: Callable[[Any], str]) -> CharEntry:
    done = [r for r in e.runs if r.info.status == "FINISHED"]
    energies = [energy_of(r) for r in done]
    kinds = {k for _, k in energies}
    kind = kinds.pop() if len(kinds) == 1 else ""
    c = CharEntry(
        e,
        Interval([r.data.metrics["accuracy"] for r in done if "accuracy" in r.data.metrics]),
        Interval([j for j, _ in energies if j is not None]),
        kind,
        Interval(
            [r.data.metrics["train_energy_fixed50_j"] for r in done if "train_energy_fixed50_j" in r.data.metrics]
        ),
    )
    failed = [r for r in e.runs if r.info.status != "FINISHED"]
    if failed:
        c.reasons.append(f"error on {len(failed)} of {len(e.runs)} seeds: {failure(failed[0])}")
    if len(done) < min_seeds:
        c.reasons.append(f"seeds: {len(done)} finished, the ranking needs {min_seeds}")
    if done and not kind:
        c.reasons.append(
            "no training energy: none measured (a GPU's counter), none modelled (tracker=energy saw no numpy work "
            "or torch optimizer steps in its training)"
            if not kinds - {""}
            else "its seeds' energy is of two kinds (measured and modelled)"
        )
    return c


@dataclass
class CharLeaderboard(Leaderboard):
    key_metrics: ClassVar[tuple[str, ...]] = ("accuracy", "train_energy_measured_j", "energy_pj", "bits_per_char")

    board: list[CharEntry] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.rules["kind"]

    def header(self) -> str:
        r = self.rules
        gate = (
            "gated on valid: the text train() was given (the group's rule)"
            if r["gate"] == "valid"
            else "gated on test: a text train() never received"
        )
        budget = f"; budget: <= {r['budget']:g} J, ranked by accuracy" if r["budget"] is not None else ""
        return (
            f"{self.study}: parent run {self.parent_id} (experiment {self.experiment}), scorer {self.scorer}\n"
            f"{gate}; training energy {self.kind or 'absent'} (Joules)\n"
            f"floor: accuracy >= {r['floor']:g}, ranked by training J, lowest first{budget}; "
            f"ties: 95% intervals overlap (=)"
        )

    def framings(self) -> list[tuple[str, str, list[CharEntry]]]:
        """(name, title, ranked entrants) of each framing."""
        out = [("floor", f"floor: accuracy >= {self.rules['floor']:g}, by training J", self._ranked("floor"))]
        if self.rules["budget"] is not None:
            out.append(("budget", f"budget: <= {self.rules['budget']:g} J, by accuracy", self._ranked("budget")))
        return out

    def _ranked(self, framing: str) -> list[CharEntry]:
        return [c for c in self._order(framing) if framing in c.rank]

    def _order(self, framing: str) -> list[CharEntry]:
        key = (lambda c: c.joules.mean) if framing == "floor" else (lambda c: -c.accuracy.mean)
        return sorted((c for c in self.board if not c.reasons and c.kind == self.kind), key=key)

    def rank(self) -> None:
        """Each framing's ranks: an entrant tied with the one above shares its rank."""
        r = self.rules
        for framing in ("floor", "budget"):
            if framing == "budget" and r["budget"] is None:
                continue
            ok = [
                c
                for c in self._order(framing)
                if (c.accuracy.mean >= r["floor"] if framing == "floor" else c.joules.mean <= r["budget"])
            ]
            figure = (lambda c: c.joules) if framing == "floor" else (lambda c: c.accuracy)
            place, labels = 0, []
            for i, c in enumerate(ok):
                tied = i > 0 and figure(c).overlaps(figure(ok[i - 1]))
                place = place if tied else i + 1
                labels.append((c, place, tied))
            shared = {p for _, p, t in labels if t}
            for c, p, _ in labels:
                c.rank[framing] = f"{p}=" if p in shared else str(p)

    def unranked(self) -> list[tuple[CharEntry, str]]:
        """Every entrant missing from a framing, and why."""
        r, out = self.rules, []
        for c in self.board:
            why = list(c.reasons)
            if not c.reasons and c.kind != self.kind:
                why.append(f"energy {c.kind}: the board ranks {self.kind} Joules")
            if c.accuracy.values and c.accuracy.mean < r["floor"]:
                why.append(f"accuracy {c.accuracy.mean:.3f} < floor {r['floor']:g}")
            if c.joules.values and r["budget"] is not None and c.joules.mean > r["budget"]:
                why.append(f"training {c.joules.mean:.3g} J > budget {r['budget']:g} J")
            if why:
                out.append((c, "; ".join(why)))
        return out

    def rows(self) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
        """(header, rows) of the floor framing (the first), then of the unranked."""
        head, ranked = self._table("floor")
        return head, ranked, *self._out()

    def _out(self) -> tuple[list[str], list[list[str]]]:
        rows = [
            [c.label, c.seeds, f"{c.accuracy.mean:.3f}" if c.accuracy.values else "-", w] for c, w in self.unranked()
        ]
        return ["entrant", "seeds", "accuracy", "why"], rows

    def _table(self, framing: str) -> tuple[list[str], list[list[str]]]:
        fixed = any(c.fixed50.values for c in self.board)
        head = ["#", "entrant", "seeds", "accuracy 95%", "train J 95%", "cv J", "cv acc"] + ["50 W J"] * fixed
        rows = []
        for c in self._ranked(framing):
            row = [c.rank[framing], c.label, c.seeds, c.accuracy.text(".3f"), c.joules.text(".3g")]
            row += [_pct(c.joules.cv), _pct(c.accuracy.cv)] + [f"{c.fixed50.mean:.3g}"] * fixed
            rows.append(row)
        return head, rows

    def spread(self) -> list[str]:
        """The run-to-run spread of every entrant with finished runs: the coefficient of variation of its Joules
        and its accuracy over its seeds (the reproduction tolerance the group's rules leave open)."""
        return [
            f"{c.label}: cv of training J {_pct(c.joules.cv)}, of accuracy {_pct(c.accuracy.cv)} "
            f"over {len(c.accuracy.values)} seeds"
            for c in self.board
            if len(c.accuracy.values) > 1
        ]

    def markdown(self) -> str:
        parts = [self.header().replace("\n", "  \n"), ""]
        for name, title, _ in self.framings():
            head, rows = self._table(name)
            parts += [f"**{title}**", "", markdown_table(head, rows) if rows else "(none)", ""]
        head, out = self._out()
        if out:
            parts += ["**out of a ranking**", "", markdown_table(head, out), ""]
        parts += ["**run-to-run spread**", "", *(f"- {s}" for s in self.spread())]
        parts += [f"- {n}" for n in self.notes]
        return "\n".join(parts) + "\n"

    def hidden(self) -> int:
        return 0  # every column of its tables is on the terminal (they fit 80 columns)

    def rich_tables(self, wide: bool = False) -> list[Table]:
        tables = []
        for name, title, _ in self.framings():
            head, rows = self._table(name)
            tables.append(_rich(title, head, rows))
        head, out = self._out()
        if out:
            tables.append(_rich("out of a ranking", head, out, "red"))
        return tables

    def csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(
            ["entrant", "path", "finished", "runs", "rank_floor", "rank_budget", "accuracy", "accuracy_ci95",
             "train_j", "train_j_ci95", "energy_kind", "cv_train_j", "cv_accuracy", "fixed50_j", "not_ranked"]
        )  # fmt: skip
        why = {id(c): w for c, w in self.unranked()}
        for c in self.board:
            w.writerow(
                [c.label, c.entry.path, c.entry.finished, len(c.entry.runs), c.rank.get("floor", ""),
                 c.rank.get("budget", ""), c.accuracy.mean, c.accuracy.half, c.joules.mean, c.joules.half, c.kind,
                 c.joules.cv, c.accuracy.cv, c.fixed50.mean if c.fixed50.values else "", why.get(id(c), "")]
            )  # fmt: skip
        return buf.getvalue()


def board_class(rules: dict[str, Any]) -> type[Leaderboard]:
    """The leaderboard a challenge's rules (its preset's `compare.leaderboard`) make: the character one sets a
    floor of accuracy, the parity one a least accuracy."""
    return CharLeaderboard if "accuracy_floor" in rules else Leaderboard


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%" if math.isfinite(v) else "-"


def _rich(title: str, head: list[str], rows: list[list[str]], style: str | None = None) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    t.caption = None if rows else "(none)"
    for c in head:
        wraps = c in ("entrant", "why")
        t.add_column(c, justify="left" if wraps else "right", no_wrap=not wraps, overflow="fold")
    for row in rows:
        t.add_row(*(PathCell(v) if c == "entrant" else v for c, v in zip(head, row)), style=style)
    return t


def _rule(runs: list, settings: dict[str, Any], key: str) -> float | None:
    """A ranking rule: the round's own (its runs' param extra.<key>, sweeps/char_challenge.yaml), else the preset's."""
    value = next((r.data.params[f"extra.{key}"] for r in runs if f"extra.{key}" in r.data.params), settings.get(key))
    return None if value in (None, "None", "") else float(value)


def char_leaderboard(
    rounds: Sequence[tuple[Any, list]],
    settings: dict[str, Any],
    failure: Callable[[Any], str],
    study: str,
    experiment: str,
) -> CharLeaderboard:
    """The leaderboard of `rounds` ((parent run, its child runs), the latest first): see the module's docstring."""
    latest, latest_runs = rounds[0]
    entries, notes = latest_entries(rounds, CORPUS)
    board = [judge(e, int(settings.get("min_seeds", MIN_SEEDS)), failure) for e in entries]
    kinds = {c.kind for c in board if not c.reasons}
    gates = {r.data.params.get("method.gate_split") for r in latest_runs} - {None}
    lb = CharLeaderboard(
        study=study,
        parent_id=latest.info.run_id,
        experiment=experiment,
        scorer=scorer_of(latest_runs),
        seeds=sorted({r.data.params.get("problem.seed", "?") for r in latest_runs}),
        rules={
            "floor": float(_rule(latest_runs, settings, "accuracy_floor") or 0.70),
            "budget": _rule(latest_runs, settings, "energy_budget_j"),
            "gate": "valid" if "valid" in gates else "test",
            "kind": MEASURED if MEASURED in kinds else MODELLED if MODELLED in kinds else "",
        },
        passed=[],
        out=[],
        notes=notes,
        board=board,
    )
    lb.rank()
    lb.passed = [c.entry for c in lb._ranked("floor")]
    lb.out = [c.entry for c, _ in lb.unranked()]
    return lb
