"""`python -m sweep.compare <preset | experiment | parent run id>`: one sweep's results as a table and a plot.

Finds the sweep's parent run (the latest one for a preset's or an experiment's name, or the given id; a sweep
without a preset is compared as its experiment's study), loads its child runs, groups
them by the swept keys (config params that vary across the children; seeds and repeats are aggregated over, not
grouped by), prints mean ± std per group, draws the plot that fits the study (`sweep.report.plots`) and logs table
(CSV + Markdown) and plot as artifacts of the parent run, under `compare/`.
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

from hydra_plugins.sweep_launcher.api import command, prog
from sweep.arguments import Parser, summary
from sweep.paths import PROJECT_ROOT, default_tracking_uri, safe_name, shown
from sweep.record import address, store, writes
from sweep.record.registry import open_store
from sweep.report import whole
from sweep.report.char_leaderboard import CharLeaderboard, board_class, char_leaderboard
from sweep.report.curves import plot_curves
from sweep.report.grouping import summarize
from sweep.report.leaderboard import Leaderboard, leaderboard
from sweep.report.pareto import front, plot_front
from sweep.report.plots import plot_comparison
from sweep.report.queries import (
    RUN_ID,
    deleted_children,
    failure_reasons,
    find_parent,
    last_line,
    load_curves,
    rounds,
    study_of,
    study_runs,
    sweep_runs,
)
from sweep.report.study import key_metrics, proxy_ranking, sweep_settings
from sweep.report.table import Comparison

PROG = prog("sweep.compare")  # its one-line messages' first word
ARTIFACT_DIR = "compare"
WRAPPED_MIN = 20  # the least width of a terminal column whose cells wrap (an entrant's path, a reason)


class Terminal(Console):
    """rich's console, but a closed output (`| head -1`) is a BrokenPipeError for the command to answer (exit 141,
    as a shell's writer that SIGPIPE ended): rich's own answer is exit 1, silent, which says the command failed."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(32, "the reader of the output ended")


def compare(
    ref: str,
    tracking_uri: str | None = None,
    out_dir: Path | None = None,
    log: bool = True,
    plot: bool = True,
    settings: dict[str, Any] | None = None,
) -> tuple[Comparison | Leaderboard, list[Path]]:
    """Build the comparison for sweep `ref`, write table and plot(s) to `out_dir`, log them on the parent run.
    `settings` (baseline, relative) default to the preset's `compare:` node; a challenge's (`leaderboard`) makes
    its leaderboard instead (sweep.report.leaderboard)."""
    uri = tracking_uri or default_tracking_uri()
    address.check(uri)  # an address no store is at (exit 2); a server or database that does not answer: seconds
    target = open_store(uri)
    target.check(write=False)  # a missing store is not created; a corrupt one is one line
    if log:
        try:
            target.check(write=True)
        except store.StoreError as e:  # a read-only store is read: the table and plot stay on disk
            print(f"{PROG}: {e}: table and plot not logged to the parent run", file=sys.stderr)
            log = False
    client = target.client(write=log)  # MLflow opens a store to write it: one it cannot write is opened read-only
    parent = find_parent(client, ref)
    experiment = client.get_experiment(parent.info.experiment_id).name
    study = study_of(parent, experiment)  # an experiment's sweep may be a preset's: its settings
    settings = sweep_settings(parent, study) if settings is None else settings
    out_dir = out_dir or PROJECT_ROOT / "outputs" / "compare" / f"{safe_name(study)}-{parent.info.run_id[:8]}"
    if settings.get("leaderboard"):  # a challenge: its ranking, not the table
        rank = char_leaderboard if board_class(settings["leaderboard"]) is CharLeaderboard else leaderboard
        board = rank(
            rounds(client, parent, study), settings["leaderboard"], partial(last_line, client), study, experiment
        )
        files = [out_dir / "leaderboard.md", out_dir / "leaderboard.csv"]
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            whole.text(files[0], f"# {study}\n\n" + board.markdown())
            whole.text(files[1], board.csv())
        except OSError as e:  # the ranking is shown, the line says what was not written
            board.unwritten = f"{e.filename or out_dir}: {e.strerror or e}"
            return board, []
        if log:
            board.logged = log_files(client, uri, board.parent_id, files)
        return board, files
    search = settings.get("objectives")  # a search's front: its runs are every sweep of the study
    objectives = search or settings.get("front")
    runs = study_runs(client, parent, study) if search else sweep_runs(client, parent)
    if not runs:
        raise LookupError(f"parent run {parent.info.run_id} has no child runs")
    cmp = summarize(
        runs,
        study=study,
        parent_id=parent.info.run_id,
        experiment=experiment,
        baseline=settings.get("baseline"),
        relative=settings.get("relative"),
        key_metrics=key_metrics(settings),
    )
    cmp.deleted = deleted_children(client, parent)
    failure_reasons(client, cmp, runs)
    load_curves(client, cmp)
    if objectives:
        cmp.front = front(cmp, objectives)

    started = time.time() - 0.1  # the kernel's file times run on a coarser clock
    try:
        files = write_files(cmp, runs, settings, out_dir, plot, objectives)
    except OSError as e:  # a directory this user cannot write: the table is shown, the line says what was not written
        done = sorted(f.name for f in out_dir.glob("*") if f.stat().st_mtime >= started) if out_dir.is_dir() else []
        cmp.unwritten = f"{e.filename or out_dir}: {e.strerror or e}" + (
            f" (those before it were: {', '.join(done)})" if done else ""
        )
        return cmp, []
    if log:
        cmp.logged = log_files(client, uri, cmp.parent_id, files)
    return cmp, files


def write_files(
    cmp: Comparison, runs: list, settings: dict[str, Any], out_dir: Path, plot: bool, objectives: Any
) -> list[Path]:
    """The table (CSV, Markdown), a search's front, the plot(s) and a proxy ranking, in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [out_dir / "table.csv", out_dir / "table.md"]
    whole.text(files[0], cmp.csv())
    whole.text(
        files[1],
        f"# {cmp.study}\n\nParent run `{cmp.parent_id}` (experiment `{cmp.experiment}`), mean ± std "
        f"over seeds/repeats.\n\n" + cmp.markdown(),
    )
    if cmp.front is not None:
        files.append(out_dir / "front.md")
        whole.text(files[-1], f"# {cmp.front.study}\n\n" + cmp.front.markdown())
    if plot:
        png = out_dir / f"{safe_name(cmp.study)}.png"
        files.append(
            plot_front(cmp, cmp.front, objectives, png, settings.get("versus", ()))
            if cmp.front is not None
            else plot_comparison(cmp, png)
        )
        if any(r.curves for r in cmp.rows):
            files.append(plot_curves(cmp, out_dir / f"{safe_name(cmp.study)}-curves.png"))
    if settings.get("proxies"):
        files += proxy_ranking(cmp, runs, settings["proxies"], out_dir, plot)
    return files


def log_files(client: Any, uri: str, parent_id: str, files: list[Path]) -> bool:
    """The report's files as artifacts of the parent run, under compare/; whether they were (one line if not)."""
    try:
        writes.log_files(client, parent_id, files, ARTIFACT_DIR)
    except Exception as e:  # noqa: BLE001 - a tracking server's reader (HTTP 403): may read the runs, not write
        print(f"{PROG}: {store.StoreError(uri, store.cause_of(e))}: table and plot not logged", file=sys.stderr)
        return False
    return True


def fitting(console: Console, tables: list[Any]) -> Console:
    """A console wide enough for every column of `tables`: each that does not wrap (an identity, a figure) whole,
    each that wraps (an entrant, a reason) at least WRAPPED_MIN wide; wider than the terminal where they need it
    (the terminal wraps the lines, a pipe or `less -S` shows them whole). In a narrower one rich shrinks a lone
    wrapping column to nothing (the entrant column gone) and cuts figures without a mark ("1,937,859,26")."""
    need = 0
    for t in tables:
        wrapping = [c for c in t.columns if not c.no_wrap]
        saved = [c.max_width for c in wrapping]
        for c in wrapping:
            c.max_width = min(c.max_width or WRAPPED_MIN, WRAPPED_MIN)
        try:
            need = max(need, console.measure(t, options=console.options.update_width(10_000)).maximum)
        finally:
            for c, w in zip(wrapping, saved):
                c.max_width = w
    return Terminal(width=need, file=console.file) if need > console.width else console


def wrote(report: Any, files: list[Path]) -> str:
    """The line naming a report's files, and the run they were logged on (a leaderboard's too: its line left
    out where its files went in the store)."""
    logged = f" (logged to run {report.parent_id} under {ARTIFACT_DIR}/)" if report.logged else ""
    return f"wrote {', '.join(str(f) for f in files)}{logged}"


def not_a_directory(out: Path) -> str | None:
    """Why `out` cannot be made a directory, said before the store is read (None: it can be): it, or the nearest of
    its parents that is there, is a file (or a FIFO, a device...), or its name is one the filesystem refuses."""
    said = shown(out)
    existing = out
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
    except OSError as e:  # ENAMETOOLONG: Path.exists raises it
        return f"{said}: {e.strerror}"
    if existing.is_dir():
        return None
    kind = store.special_file(existing) or "a file"
    return f"{said} is {kind}" if existing == out else f"{said}: {existing} is {kind}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = Parser(PROG, prog=command("sweep.compare"), description=summary(__doc__))
    ap.add_argument(
        "ref",
        metavar="study",  # as sweep-ui and the docs call it ("the following arguments are required: ref")
        help="a preset's name (e.g. tiled_w1) or an experiment's (its latest sweep), or a parent run id",
    )
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (for a findings note)")
    ap.add_argument(
        "--out", type=Path, default=None, help="where to write table and plot (default outputs/compare/<study>-<run>)"
    )
    ap.add_argument(
        "--tracking-uri", default=None, help="MLflow store (default: the project's, or $MLFLOW_TRACKING_URI)"
    )
    ap.add_argument("--no-log", action="store_true", help="do not log the artifacts on the parent run")
    ap.add_argument("--no-plot", action="store_true", help="the table and its files only, no plot")
    ap.add_argument(
        "--wide",
        action="store_true",
        help="every column on the terminal, not only the study's key "
        "metrics (table.md and table.csv always hold every column)",
    )
    a = ap.parse_args(argv)
    why = not_a_directory(a.out) if a.out is not None else None
    if why:  # (the table came, then "File exists" or "Not a directory", exit 1; a long name was a traceback)
        print(f"{PROG}: --out {why}: expected a directory (made where there is none)", file=sys.stderr)
        return 2
    # a failed run's reason is read from its traceback artifact: MLflow drew a progress bar on stderr for each
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        cmp, files = compare(a.ref, a.tracking_uri, a.out, log=not a.no_log, plot=not a.no_plot)
    except LookupError as e:  # a study or run not in the store (a misspelling): bad input, as sweep's and rescore's
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except address.BadAddress as e:
        print(f"{PROG}: store {store.redacted(a.tracking_uri or default_tracking_uri())}: {e}", file=sys.stderr)
        return 2
    except store.StoreError as e:  # a store that is not there is bad input; one that fails to open is not
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2 if isinstance(e, store.NoStore) else 1
    if isinstance(cmp, Leaderboard) and not a.markdown:
        tables = cmp.rich_tables(wide=a.wide)
        console = fitting(Terminal(), tables)
        console.print(cmp.header(), markup=False)
        for table in tables:
            console.print(table)
        if cmp.hidden() and not a.wide:  # the disqualified's figures it left out (they were gone without a word)
            more = f"{cmp.hidden()} more column{'s' * (cmp.hidden() > 1)} of the disqualified"
            console.print(f"{more} with --wide, and in leaderboard.md / .csv", markup=False)
        for note in cmp.notes:
            console.print(note, markup=False)
        for line in getattr(cmp, "spread", list)():  # the character challenge's run-to-run spread
            console.print(line, markup=False, emoji=False)
        if files:
            console.print(wrote(cmp, files), markup=False)
    elif a.markdown:
        print(cmp.markdown(), end="")
        if getattr(cmp, "proxies", ""):
            print("\n" + cmp.proxies, end="")
        if getattr(cmp, "front", None) is not None:
            print(f"\n{cmp.front.study}:\n\n{cmp.front.markdown()}", end="")
    elif isinstance(cmp, Comparison):
        console = Terminal()
        tables = [c.rich_table(wide=a.wide) for c in (cmp, cmp.front) if c is not None]
        console = fitting(console, tables)
        if not a.wide:
            latest = "" if RUN_ID.match(a.ref) else " (its latest sweep)"  # which of the store's sweeps `ref` named
            console.print(  # one line, whatever the terminal's width (a pipe's is 80)
                f"{cmp.study}: parent run {cmp.parent_id}, experiment {cmp.experiment}{latest}",
                soft_wrap=True,
                markup=False,
            )
        for table in tables:
            console.print(table)
        for note in cmp.notes(None if a.wide else cmp.terminal_columns()):  # the batch mark, groups with no run
            console.print(note, markup=False, style="red" if note.endswith("(no finished run)") else None)
        if cmp.proxies:  # Markdown, to paste into a note: its rows whole (the terminal wraps them, not we)
            console.print(cmp.proxies, markup=False, soft_wrap=True)
        hidden = len(cmp.metrics) + len(cmp.relative) - len(cmp.terminal_columns())
        if hidden and not a.wide:
            console.print(f"{hidden} more column{'s' * (hidden > 1)} with --wide, and in table.md / table.csv")
        if files:
            console.print(wrote(cmp, files))
    if cmp.unwritten:
        print(
            f"{PROG}: table and plot not written: {cmp.unwritten} (--out DIR writes them elsewhere)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
