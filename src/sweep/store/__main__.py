"""`python -m sweep.store migrate --from URI --to URI [--experiment NAME ...] [--dry-run]`: copy the runs of one
MLflow store (params, metric histories, tags, artifacts, parent links, status and times) into another. A second
migrate copies only what is new; the copy itself is sweep.store.migrate."""

from __future__ import annotations

import os
import signal
import sys
import time
from contextlib import ExitStack, nullcontext
from typing import Callable, Sequence

from hydra_plugins.sweep_launcher.api import SIGNALS, command, prog, starting

PROG = prog("sweep.store", " migrate")  # its one-line messages' first words (migrate: its one subcommand)

# the imports take seconds: a signal in them is one line and 128+n, not a traceback
with starting(str(prog("sweep.store"))):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from sweep.arguments import Parser
    from sweep.record import address, store
    from sweep.record.exclusive import exclusive
    from sweep.store.migrate import BadInput, migrate, plan
DESCRIPTION = "copy one MLflow store's runs into another; run again, it copies only what is new (docs/store.md)"


class _Stop:
    """A stop signal (Ctrl-C, SIGTERM, SIGHUP, Ctrl-\\: the launcher's SIGNALS). Before the copying starts
    nothing is written: the command stops at once. While it copies, the first lets the run being copied finish,
    then the command stops: no copy is left half written (SIGTERM and SIGHUP ended it with no line, a copy left
    RUNNING). A second one stops at once (the next migrate replaces that copy)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.copying = False

    def __call__(self, signum: int, frame: object) -> None:
        first = self.signum is None
        self.signum = self.signum or signum
        if not first or not self.copying:
            raise KeyboardInterrupt

    @property
    def pressed(self) -> bool:
        return self.signum is not None

    @property
    def code(self) -> int:
        return 128 + (self.signum or signal.SIGINT)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # a line about migrate's options names it; one about the subcommand itself (missing, misspelt) only the command
    ap = Parser(
        PROG if args[:1] == ["migrate"] else prog("sweep.store"), prog=command("sweep.store"), description=DESCRIPTION
    )
    ap.add_argument("action", choices=("migrate",))
    ap.add_argument(
        "--from",
        dest="source",
        metavar="URI",
        required=True,
        help="the store to copy from (read only), e.g. sqlite:///mlflow.db",
    )
    ap.add_argument(
        "--to", dest="target", metavar="URI", required=True, help="the store to copy into, e.g. http://mlflow-host:5000"
    )
    ap.add_argument(
        "--experiment", action="append", default=[], metavar="NAME", help="copy only this experiment (repeatable)"
    )
    ap.add_argument("--dry-run", action="store_true", help="count what would be copied; write nothing")
    a = ap.parse_args(args)
    # the summary line and the bar say what happened: not MLflow's INFO lines and a download bar per run
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # and a server's two links per run
    err = Console(stderr=True)
    stop = _Stop()
    previous = {s: signal.signal(s, stop) for s in SIGNALS}
    stack = ExitStack()
    try:
        for flag, uri in (("--from", a.source), ("--to", a.target)):
            if why := address.problem(uri):
                raise BadInput(f"{flag} {store.redacted(uri)}: {why}")
        for uri in (a.source, a.target):  # a server or database that does not answer: seconds, not minutes
            address.check(uri)
        say = lambda line: print(f"{PROG}: {line}", file=sys.stderr, flush=True)  # noqa: E731
        one_at_a_time = nullcontext() if a.dry_run else exclusive(a.target, "migrate")
        stack.enter_context(one_at_a_time)  # held until the command ends
        # reading both stores' runs takes seconds to a minute (a server's pages): it was silent for 37-81 s
        reading = f"reading the runs of {store.redacted(a.source)} and what {store.redacted(a.target)} has of them"
        p = plan(a.source, a.target, a.experiment, a.dry_run, lambda: say(reading))  # bad input: its line alone
        todo = sum(1 for _, r in p.runs if r.info.run_id not in p.copies)
        say(f"{len(p.runs)} run(s) found, {todo} not copied yet; {'counting' if a.dry_run else 'copying'} them")
        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
        )
        stop.copying = True
        with bar if err.is_terminal else nullcontext():
            task = bar.add_task("migrate", total=len(p.runs))
            advance = (
                (lambda name: bar.update(task, advance=1, description=name[:40]))
                if err.is_terminal
                else _every_tenth(len(p.runs), say)  # a pipe or a log: a line at each tenth, not a bar
            )
            summary = migrate(p, a.dry_run, advance, stop=lambda: stop.pressed)
    except BadInput as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except store.StoreError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            f"{PROG}: interrupted by {_name(stop.signum)}; the same command copies the rest (an unfinished copy is "
            "replaced)",
            file=sys.stderr,
        )
        return stop.code
    except Exception as e:  # noqa: BLE001 - MLflow's errors reading or opening a store: one line
        print(f"{PROG}: {store.cause_of(e)}", file=sys.stderr)
        return 1
    finally:
        stack.close()
        for s, h in previous.items():
            signal.signal(s, h)
    for failure in summary.failed:
        print(f"{PROG}: run {failure}", file=sys.stderr)
    if summary.stopped:
        print(
            f"{PROG}: interrupted by {_name(stop.signum)}: {summary.line(a.dry_run)}; the same command copies the rest",
            file=sys.stderr,
        )
        return stop.code
    verb = "dry run" if a.dry_run else "migrated"
    print(f"{verb} {a.source} -> {a.target}: {summary.line(a.dry_run)}")
    return 1 if summary.failed else 0


def _name(signum: int | None) -> str:
    return "Ctrl-C" if signum in (None, signal.SIGINT) else signal.Signals(signum).name


def _every_tenth(total: int, say: Callable[[str], None]) -> Callable[[str], None]:
    """A progress line at each tenth of `total` runs (with the seconds so far): what a bar says, on a pipe."""
    done, t0, step = [0], time.monotonic(), max(1, -(-total // 10))

    def advance(name: str) -> None:
        done[0] += 1
        if done[0] % step == 0 or done[0] == total:
            say(f"{done[0]}/{total} run(s) ({done[0] / total:.0%}, {time.monotonic() - t0:.0f} s)")

    return advance


if __name__ == "__main__":
    sys.exit(main())
