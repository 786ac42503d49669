"""`sweep-rescore <experiment | run id ...> tracker=<name> [tracker.<key>=<value> ...]`: a tracker's figures for
runs already recorded, computed from the traces they stored (trace.json) and logged to the same runs.

The scoring itself is sweep.rescore.runs.

Exit 0: every run named was scored; 1: a store problem, or runs without a stored trace (named; the others are
scored); 2: bad input (a tracker or key that does not exist, an experiment or run not in the store).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Optional, Sequence

from hydra_plugins.sweep_launcher.api import (
    as_interrupted,
    command,
    listening,
    output_closed,
    prog,
    starting,
)

PROG = prog("sweep.rescore")  # its one-line messages' first word

# the imports take seconds: a signal in them is one line and 128+n, not a traceback
with starting(str(PROG)):
    from sweep.arguments import Parser, summary
    from sweep.errors import ConfigError
    from sweep.metrics import line
    from sweep.paths import default_tracking_uri
    from sweep.record import address, remote, store
    from sweep.record.background import signals_held
    from sweep.record.exclusive import exclusive
    from sweep.record.registry import open_store
    from sweep.record.tags import TRACKER_VERSION_TAG


def main(argv: Sequence[str] | None = None) -> int:
    ap = Parser(PROG, prog=command("sweep.rescore"), description=summary(__doc__))
    ap.add_argument("args", nargs="+", help="experiment names or run ids, then tracker=<name> [tracker.<key>=...]")
    ap.add_argument(
        "--tracking-uri", default=None, help="MLflow store (default: the project's, or $MLFLOW_TRACKING_URI)"
    )
    a = ap.parse_intermixed_args(argv)  # runs, tracker=... and options in any order (sweep takes them so)
    try:
        with listening():  # every stop signal as Ctrl-C: one line and 128+n (SIGTERM and SIGHUP ended it silently)
            return _rescore(a)
    except KeyboardInterrupt as e:  # before the first run is scored
        stopped = as_interrupted(e)
        print(f"{PROG}: interrupted by {stopped.name}: nothing scored", file=sys.stderr)
        return stopped.exit_code


def _rescore(a: Any) -> int:
    refs = [x for x in a.args if "=" not in x]
    overrides = [x for x in a.args if "=" in x]
    from sweep.rescore.runs import tracker_config  # noqa: PLC0415

    try:
        if not refs:
            raise ConfigError("name the runs to score: an experiment's name or run ids")
        node = tracker_config(overrides)
    except ConfigError as e:
        print(f"{PROG}: config error: {e}", file=sys.stderr)
        return 2
    uri = a.tracking_uri or default_tracking_uri()
    held = contextlib.ExitStack()
    try:
        address.check(uri)  # as compare's: an address no store is at (exit 2); a server that does not answer
        target = open_store(uri)
        target.check(write=False)  # a store that is not there is not made: there is nothing in it to score
        target.check(write=True)  # milliseconds, where MLflow would retry for minutes
        held.enter_context(exclusive(uri, "sweep-rescore"))  # two at once logged every figure twice
    except address.BadAddress as e:
        print(f"{PROG}: store {store.redacted(uri)}: {e}", file=sys.stderr)
        return 2
    except store.StoreError as e:  # a store that is not there is bad input, as compare's
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2 if isinstance(e, store.NoStore) else 1
    with held:
        return _score_all(a, uri, target, node, refs)


def _score_all(a: Any, uri: str, target: Any, node: Any, refs: list[str]) -> int:
    """The runs named scored, each said as it is; the exit status."""
    from sweep.job import build  # noqa: PLC0415 - after --help: Hydra, the trackers
    from sweep.rescore.runs import select  # noqa: PLC0415

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a line of its own per run read
    remote.client_settings()  # a tracking server lost mid-way: an answer in seconds, not minutes of retries
    from mlflow.exceptions import MlflowException  # noqa: PLC0415 - seconds to import: after the store's quick checks

    client = target.client()
    name, version = node["name"], build(node).version
    done, left = 0, []  # (run, why) of each run not scored
    try:
        try:
            runs = select(client, refs)
        except LookupError as e:  # an experiment or run not in the store (not an IndexError of a run's scoring)
            print(f"{PROG}: {e}", file=sys.stderr)
            return 2
        for run in runs:
            # a signal waits for the run's figures (raised inside MLflow's threads, Python printed it as "Exception
            # ignored in ..." and went on), then stops the command here
            with signals_held():
                said = _score_one(client, run, node, version, left)
            if said is not None:
                done += 1  # (counted before it is said: a closed output must not lose it)
                print(said, flush=True)
        print(
            f"{PROG}: {done} of {len(runs)} run(s) scored with tracker={name} (version {version}) in {uri}", flush=True
        )
    except BrokenPipeError:  # `| head -1`: a write's reader left; the runs scored so far keep theirs, as at Ctrl-C
        stopped = output_closed()
        print(
            f"{PROG}: interrupted by {stopped.name}: {done} run(s) scored before; run it again to score all",
            file=sys.stderr,
        )
        return stopped.exit_code
    except KeyboardInterrupt as e:  # a run is scored once its version tag is there (written last, runs.log)
        stopped = as_interrupted(e)
        print(
            f"{PROG}: interrupted by {stopped.name}: {done} run(s) scored before; run it again to score all",
            file=sys.stderr,
        )
        return stopped.exit_code
    except (MlflowException, OSError) as e:  # the store refused a read or a write: the runs scored so far keep theirs
        print(f"{PROG}: {store.StoreError(uri, store.cause_of(e))} ({done} run(s) scored before)", file=sys.stderr)
        return 1
    for line in unscored(left):
        print(f"{PROG}: not scored: {line}", file=sys.stderr)
    return 1 if left or not runs else 0


def unscored(left: list[tuple[str, str]], named: int = 3) -> list[str]:
    """One line per reason a run was not scored, naming its runs, the first `named` of them: a study recorded with
    tracker=none said "no trace.json ..." once a run (18 lines alike for sign_vs_sgd)."""
    runs: dict[str, list[str]] = {}
    for label, why in left:
        runs.setdefault(why, []).append(label)
    return [
        f"{labels[0]}: {why}"
        if len(labels) == 1
        else f"{len(labels)} runs: {why}: {', '.join(labels[:named])}"
        + (f" and {len(labels) - named} more" if len(labels) > named else "")
        for why, labels in runs.items()
    ]


def _score_one(client: Any, run: Any, node: Any, version: str, left: list[tuple[str, str]]) -> Optional[str]:
    """The line to say once the run's figures are logged; None with why in `left` where it cannot be scored."""
    from sweep.rescore.runs import log, score  # noqa: PLC0415 - the trackers: after the store's quick checks

    label, name = f"{run.info.run_name} ({run.info.run_id})", node["name"]
    try:
        scored = score(client, run, node)
    except ValueError as e:  # a stored trace this version of sweep cannot read
        left.append((label, str(e)))
        return None
    except MemoryError as e:  # a trace too big for this machine (a damaged seq): named, the others scored
        left.append((label, f"tracker={name} needs more memory than this machine has for its trace ({e})"))
        return None
    if scored.missing:
        left.append((label, scored.missing))
        return None
    # the tracker's own figures of a run's one line (sweep.metrics.line): tracker=energy and cache said "scored",
    # their figures being energy_pj and cache_hit_rate, not a metric named as the tracker
    shown = " ".join(line(scored.report.metrics, name)) or "scored"
    if _has(run, scored, TRACKER_VERSION_TAG + name, version):  # a re-run (after a stop) doubled each history
        return f"{label}: {shown} (already on the run: nothing logged again)"
    log(client, scored, name, version)
    return f"{label}: {shown}"


def _has(run: Any, scored: Any, tag: str, version: str) -> bool:
    """Whether `run` has these figures already: its version tag (written last, so all of them) and the same
    latest values."""
    have, new = run.data.metrics, scored.report.metrics
    return run.data.tags.get(tag) == version and bool(new) and all(have.get(k) == float(v) for k, v in new.items())


if __name__ == "__main__":
    sys.exit(main())
