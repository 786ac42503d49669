"""`python -m sweep.compare <preset | parent run id>`: the command's name; the report lives in sweep.report, and for
a study kept as files in the repository (its preset's `compare.dataset`: proxy_study) in sweep.proxy_study.report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from hydra_plugins.sweep_launcher.api import (
    as_interrupted,
    check_pending,
    listening,
    output_closed,
    prog,
    starting,
)

PROG = prog("sweep.compare")

# the imports take seconds: a signal in them is one line and 128+n, not a traceback
with starting(str(PROG)):
    from sweep.paths import PROJECT_ROOT
    from sweep.report.compare import main as store_main
    from sweep.report.queries import RUN_ID
    from sweep.report.study import study_settings


def main(argv: Sequence[str] | None = None) -> int:
    try:
        with listening():  # every stop signal as Ctrl-C (SIGTERM and SIGHUP ended the command with no line)
            code = _compare(argv)
            check_pending()  # one whose exception a callback swallowed (MLflow's threads) stops the command too
        return code
    except KeyboardInterrupt as e:  # while it reads or draws: one line, not Python's traceback
        stopped = as_interrupted(e)
        print(
            f"{PROG}: interrupted by {stopped.name}: its table and plots may be partial; run it again", file=sys.stderr
        )
        return stopped.exit_code
    except BrokenPipeError:  # `| head -1`: the reader had what it wanted; silent, 141, as `git log | head` (its files
        return output_closed().exit_code  # are written before the table is shown)


def _compare(argv: Sequence[str] | None) -> int:
    ap = argparse.ArgumentParser(add_help=False)  # the dataset's few options; the store's command has them all
    ap.add_argument("ref", nargs="?", default="")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--tracking-uri", default=None)
    a, _ = ap.parse_known_args(argv)
    # a store named on the command line is read as for any study (the preset's own MLflow sweep); else the files
    dataset = "" if not a.ref or RUN_ID.match(a.ref) or a.tracking_uri else study_settings(a.ref).get("dataset", "")
    if dataset:
        from sweep.proxy_study.report import dataset_study  # noqa: PLC0415 - scipy: only for the study that has one

        return dataset_study(a.ref, PROJECT_ROOT / dataset, a.out, draw=not a.no_plot)
    return store_main(argv)


if __name__ == "__main__":
    sys.exit(main())
