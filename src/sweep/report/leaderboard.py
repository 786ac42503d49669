"""A challenge's leaderboard (`sweep-compare parity_challenge`): the entrants that passed, ranked by mean DMD over
their seeds, then the disqualified with their reasons.

An entrant is a `method.path`. Its runs are those of the latest round (a sweep of the study) that ran it, so an
entrant left out of a later round keeps its place, and a solver changed and run again replaces its earlier
figures. Rounds are compared only when one scorer measured them (`sweep.challenge.scorer`: the tag
`sweep.scorer`): the latest round's scorer decides, an entrant whose latest round another scorer measured is left
out with a note. An entrant is out for each rule it breaks (the preset's `compare.leaderboard`):
- error: a run FAILED by raising (its traceback's last line);
- time: a run killed for the launcher's time limit or stopped by its sandbox's, or one that finished past
  `time_limit_s`;
- accuracy: the mean test accuracy of its finished runs below `accuracy`;
- outside numpy: a run that took more values out of its arrays into Python than it may (`outside_numpy`);
- untraced: a run whose trace did not see its work (`untraced`: it never read x or y, or a process ran beside it).
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

from rich import box
from rich.table import Table

from sweep.metrics import cell
from sweep.record.tags import METHOD_PARAM, SCORER_TAG, TIME_LIMIT_TAG
from sweep.report.path_cell import PathCell

PATH, SEED = "method.path", "problem.seed"
REFERENCES = "sweep.challenge.references:"  # the project's own methods (sweep.challenge.references)
RULES = ("problem.n_bits", "problem.k_sparse", "problem.n_train", "problem.n_test")  # a round's problem
# the ranking's figures (each a mean over an entrant's finished runs), in column order; bytedmd where recorded
FIGURES = ("accuracy", "dmd", "bytedmd", "energy_pj", "wall_clock_s", "escaped")
RANKED_BY = "dmd"
OUT_TERMINAL_DROPS = ("bytedmd", "energy_pj", "wall_clock_s")  # the disqualified's figures the terminal leaves out
TIMED_OUT = "TimeLimit: ran past the time limit"  # a run the solver's sandbox stopped (sweep.sandbox.TimeLimit)
LIMIT_PARAM = "launcher.time_limit_s"  # a sweep's time limit, on its parent run (sweep.launch.hooks.PARENT_PARAMS)


@dataclass
class Entry:
    path: str
    runs: list  # its latest round's runs
    reasons: list[str] = field(default_factory=list)  # the rules it breaks; none: it passed
    means: dict[str, float] = field(default_factory=dict)  # figure -> mean over its finished runs
    parent: Any = None  # the parent run of the round its runs are from

    @property
    def label(self) -> str:
        return f"{self.path[len(REFERENCES) :]} (reference)" if self.path.startswith(REFERENCES) else self.path

    @property
    def finished(self) -> int:
        return sum(r.info.status == "FINISHED" for r in self.runs)


@dataclass
class Leaderboard:
    # what MLflow's UI shows first of a round's runs (sweep.report.ui): what it is judged and ranked by (the runs
    # view had no dmd column)
    key_metrics: ClassVar[tuple[str, ...]] = ("accuracy", RANKED_BY, "escaped")

    study: str
    parent_id: str
    experiment: str
    scorer: str
    seeds: list[str]  # the latest round's seeds
    rules: dict[str, Any]  # accuracy, time_limit_s
    passed: list[Entry]  # ranked
    out: list[Entry]
    notes: list[str] = field(default_factory=list)  # what was left out, and why
    logged: bool = False  # its files were logged on the parent run (sweep.report.compare)
    unwritten: str = ""  # why its files could not be written (the ranking is shown all the same)

    def figures(self) -> list[str]:
        return [f for f in FIGURES if any(f in e.means for e in self.passed + self.out)]

    def header(self) -> str:
        limit = self.rules.get("time_limit_s")
        limits = self.rules.get("time_limits") or ([limit] if limit else [])
        within = (
            f", within {limits[0]:g} s a run"
            if len(limits) == 1
            else f", within its round's time limit a run ({', '.join(f'{x:g}' for x in limits)} s)"
            if limits
            else ""
        )
        return (
            f"{self.study}: parent run {self.parent_id} (experiment {self.experiment}), scorer {self.scorer}; "
            f"latest round's seeds {', '.join(self.seeds)}; pass: mean accuracy >= {self.rules.get('accuracy')}"
            + within
            + f", no work outside numpy or the trace; ranked by mean {RANKED_BY}"
        )

    def rows(self) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
        """(header, rows) of the ranking, then of the disqualified."""
        figs = self.figures()
        ranked = [
            [str(i), e.label, f"{e.finished}/{len(e.runs)}", *(_cell(e, f) for f in figs)]
            for i, e in enumerate(self.passed, 1)
        ]
        out = [
            [e.label, f"{e.finished}/{len(e.runs)}", "; ".join(e.reasons), *(_cell(e, f) for f in figs)]
            for e in self.out
        ]
        return ["rank", "entrant", "runs", *figs], ranked, ["entrant", "runs", "disqualified for", *figs], out

    def markdown(self) -> str:
        head, ranked, out_head, out = self.rows()
        parts = [self.header(), "", _md(head, ranked)]
        if out:
            parts += ["", "Disqualified:", "", _md(out_head, out)]
        if self.notes:
            parts += ["", *(f"- {n}" for n in self.notes)]
        return "\n".join(parts) + "\n"

    def hidden(self) -> int:
        """How many of the disqualified's figures the terminal leaves out (none with no one disqualified)."""
        _, _, out_head, out = self.rows()
        return sum(c in OUT_TERMINAL_DROPS for c in out_head) if out else 0

    def rich_tables(self, wide: bool = False) -> list[Table]:
        """The terminal's tables: the ranking, then the disqualified (long cells wrap to the console's width),
        less OUT_TERMINAL_DROPS unless `wide`."""
        head, ranked, out_head, out = self.rows()
        tables = []
        for title, h, body in (("passed, ranked by mean " + RANKED_BY, head, ranked), ("disqualified", out_head, out)):
            if not body and title == "disqualified":
                continue
            t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
            keep = [i for i, c in enumerate(h) if h is head or wide or c not in OUT_TERMINAL_DROPS]
            for c in (h[i] for i in keep):
                wraps = c in ("entrant", "disqualified for")
                t.add_column(c, justify="left" if wraps else "right", no_wrap=not wraps, overflow="fold")
            for row in body:
                cells = (PathCell(row[i]) if h[i] == "entrant" else row[i] for i in keep)
                t.add_row(*cells, style="red" if h is out_head else None)
            tables.append(t)
        return tables

    def csv(self) -> str:
        figs = self.figures()
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["rank", "entrant", "path", "finished", "runs", "disqualified_for", *figs])
        for i, e in enumerate(self.passed + self.out, 1):
            rank = str(i) if i <= len(self.passed) else ""
            w.writerow(
                [
                    rank,
                    e.label,
                    e.path,
                    e.finished,
                    len(e.runs),
                    "; ".join(e.reasons),
                    *(e.means.get(f, "") for f in figs),
                ]
            )
        return buf.getvalue()


def _cell(e: Entry, figure: str) -> str:
    return cell(figure, e.means[figure]) if figure in e.means else "-"


def _md(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join(
        ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]
    )


def judge(e: Entry, accuracy: float, time_limit: float | None, failure: Callable[[Any], str]) -> None:
    """Its means, and each rule it breaks (the module's docstring)."""
    done = [r for r in e.runs if r.info.status == "FINISHED"]
    for f in FIGURES:
        values = [r.data.metrics[f] for r in done if f in r.data.metrics]
        if values:
            e.means[f] = statistics.fmean(values)
    failed = [r for r in e.runs if r.info.status != "FINISHED"]
    # killed by the launcher (its tag) or by the solver's sandbox (sweep.sandbox.TimeLimit: its traceback's last line)
    timed = [r for r in failed if TIME_LIMIT_TAG in r.data.tags or TIMED_OUT in failure(r)]
    late = [r for r in done if time_limit and r.data.metrics.get("wall_clock_s", 0.0) > time_limit]
    errors = [r for r in failed if r not in timed]
    if errors:
        e.reasons.append(f"error on {len(errors)} of {len(e.runs)} seeds: {failure(errors[0])}")
    if timed or late:
        limit = next((float(r.data.tags[TIME_LIMIT_TAG]) for r in timed if TIME_LIMIT_TAG in r.data.tags), time_limit)
        e.reasons.append(f"time: {len(timed) + len(late)} of {len(e.runs)} seeds ran past {limit:g} s")
    if done and e.means.get("accuracy", 0.0) < accuracy:
        e.reasons.append(f"accuracy: {e.means.get('accuracy', 0.0):.3f} < {accuracy:g}")
    flagged = [r for r in done if r.data.metrics.get("outside_numpy", 0.0) > 0]
    if flagged:
        most = max(r.data.metrics.get("escaped", 0.0) for r in flagged)
        allowed = flagged[0].data.metrics.get("escaped_allowed")
        e.reasons.append(
            f"outside numpy: {most:,.0f} values taken out of arrays into Python"
            + (f" (allowed {allowed:,.0f})" if allowed is not None else "")
        )
    unseen = [r for r in done if r.data.metrics.get("untraced", 0.0) > 0]
    if unseen:
        e.reasons.append(
            f"untraced: on {len(unseen)} of {len(e.runs)} seeds its trace did not see its work (no read of x or y, "
            "or a process beside it)"
        )


def scorer_of(runs: Sequence[Any]) -> str:
    """The scorer that measured a round: its runs' most common scorer tag ("?" where none has one)."""
    tags = Counter(r.data.tags[SCORER_TAG] for r in runs if SCORER_TAG in r.data.tags)
    return tags.most_common(1)[0][0] if tags else "?"


def rules_of(runs: Sequence[Any], rules: Sequence[str]) -> tuple:
    return tuple(runs[0].data.params.get(k) for k in rules) if runs else ()


def latest_entries(rounds: Sequence[tuple[Any, list]], rules: Sequence[str]) -> tuple[list[Entry], list[str]]:
    """Each entrant's runs of the latest round that ran it (`rounds`: the latest first), and notes on the entrants
    left out: their latest round had another scorer, or other values of the problem's `rules` (params)."""
    scorer = scorer_of(rounds[0][1])
    problem = rules_of(rounds[0][1], rules)
    seen: set[str] = set()  # the entrants whose latest round was taken (or left out)
    entries: list[Entry] = []
    notes: list[str] = []
    for parent, runs in rounds:
        by_path: dict[str, list] = {}
        for r in runs:
            by_path.setdefault(r.data.params.get(PATH, r.data.params.get(METHOD_PARAM, "?")), []).append(r)
        other = (
            "another scorer"
            if scorer_of(runs) != scorer
            else "another problem"
            if rules_of(runs, rules) != problem
            else ""
        )
        for path, mine in by_path.items():
            if path in seen:
                continue
            seen.add(path)
            if other:
                notes.append(f"{path}: left out, its latest round (parent run {parent.info.run_id}) had {other}")
            else:
                entries.append(Entry(path, mine, parent=parent))
    return entries, notes


def leaderboard(
    rounds: Sequence[tuple[Any, list]],
    settings: dict[str, Any],
    failure: Callable[[Any], str],
    study: str,
    experiment: str,
) -> Leaderboard:
    """The leaderboard of `rounds` ((parent run, its child runs), the latest first): see the module's docstring."""
    latest, latest_runs = rounds[0]
    scorer = scorer_of(latest_runs)
    entries, notes = latest_entries(rounds, RULES)
    accuracy = float(settings.get("accuracy", 0.95))
    limits = set()
    for e in entries:
        # the limit its own round ran under (the launcher's, recorded on the round's parent), else the preset's: an
        # entrant of an earlier round at 60 s was judged "late" against the latest round's 5 s
        limit = e.parent.data.params.get(LIMIT_PARAM) if e.parent is not None else None
        limit = float(limit or settings.get("time_limit_s") or 0) or None
        limits.add(limit)
        judge(e, accuracy, limit, failure)
    limit = latest.data.params.get(LIMIT_PARAM) or settings.get("time_limit_s")
    passed = sorted((e for e in entries if not e.reasons), key=lambda e: e.means.get(RANKED_BY, float("inf")))
    seeds = sorted({r.data.params.get(SEED, "?") for r in latest_runs}, key=lambda s: (len(s), s))
    return Leaderboard(
        study=study,
        parent_id=latest.info.run_id,
        experiment=experiment,
        scorer=scorer,
        seeds=seeds,
        rules={
            "accuracy": accuracy,
            "time_limit_s": float(limit) if limit else None,
            "time_limits": sorted(x for x in limits if x is not None),  # the entrants' rounds' limits
        },
        passed=passed,
        out=[e for e in entries if e.reasons],
        notes=notes,
    )
