"""`python -m sweep.spool list | import [--tracking-uri URI] [FILE ...]`: what waits in the spool (and the last
resort), and writing it in; FILEs: only these results (a spool file, or a printed result saved to a file).

The spool itself is sweep.record.spool, which the recorder uses; this command needs the recorder, so it
lives apart (the spool must not import the recorder back)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from hydra_plugins.sweep_launcher.api import as_interrupted, command, listening, output_closed, prog, starting

PROG = prog("sweep.spool")  # its one-line messages' first word

# the imports take seconds: a signal in them is one line and 128+n, not a traceback
with starting(str(PROG)):
    from sweep.arguments import Parser
    from sweep.record import address
    from sweep.record.recorder import Recorder
    from sweep.record.spool import damaged, entries, import_into, last_resort_dir, spool_dir
    from sweep.record.store import StoreError, redacted, special_file


def main(argv: Sequence[str] | None = None) -> int:
    try:
        with listening():  # every stop signal as Ctrl-C: one line and 128+n (SIGTERM and SIGHUP ended it silently)
            return _spool(argv)
    except KeyboardInterrupt as e:  # a result is written and its file removed whole (spool.import_into)
        stopped = as_interrupted(e)
        print(
            f"{PROG}: interrupted by {stopped.name}: the results not yet written stay in {spool_dir()} "
            f"({command('sweep.spool', 'import')} writes them in)",
            file=sys.stderr,
        )
        return stopped.exit_code
    except BrokenPipeError:  # `list | head -1`: silent, 141, as `git log | head`; what was not imported still waits
        return output_closed().exit_code


def _spool(argv: Sequence[str] | None) -> int:

    ap = Parser(PROG, prog=command("sweep.spool"), description="the spool: results kept until their store takes them")
    ap.add_argument("action", choices=("list", "import"))
    ap.add_argument(
        "--tracking-uri",
        default=None,
        help="import into this store: its results, or the FILEs named whatever store they were meant for "
        "(default: each result into its own store)",
    )
    ap.add_argument("files", nargs="*", type=Path, metavar="FILE", help="only these results (default: all waiting)")
    a = ap.parse_intermixed_args(argv)  # import --tracking-uri URI FILE: the FILEs after the option too
    if a.tracking_uri is not None and (why := address.problem(a.tracking_uri)):
        print(f"{PROG}: --tracking-uri {redacted(a.tracking_uri)}: {why}", file=sys.stderr)
        return 2
    for path in a.files:  # a FILE named that holds no file at all: bad input (a FIFO's read waited for ever)
        kind = "not there" if not path.exists() else "a directory" if path.is_dir() else special_file(path)
        if kind:
            print(
                f"{PROG}: FILE {path} is {kind}: expected a result's file (`list` names the spool's)", file=sys.stderr
            )
            return 2
    pending = entries(a.tracking_uri, a.files)
    unreadable = damaged(a.files)
    for path, why in unreadable:  # left where they are, said every time: a result in one is not lost silently
        print(f"{PROG}: {path}: not a result this command can read ({why}); left there", file=sys.stderr)
    if a.action == "list":
        for e in pending:
            what = e.result.summary() if e.result else f"end of parent run {e.end['run_id']}: {e.end['status']}"
            print(f"{e.path.name}  {e.tracking_uri}  experiment={e.experiment}  {what}  ({e.cause})")
        print(f"{len(pending)} result(s) in {spool_dir()} and {last_resort_dir()}")
        return 1 if unreadable else 0

    # each result into the store it names (named FILEs: into --tracking-uri, if given); nothing spooled opens (and
    # so creates) no store at all
    stores: dict[str, list] = {}
    for e in pending:
        stores.setdefault(a.tracking_uri or e.tracking_uri, []).append(e)
    if not stores:
        others = len(entries(None, a.files)) if a.tracking_uri and not a.files else 0
        for_others = (  # it said "no result waits" with results waiting for other stores
            f" for {redacted(a.tracking_uri or '')}; {others} wait for other stores (`list` names them; `import "
            f"--tracking-uri URI FILE` writes one into URI)"
            if others
            else ""
        )
        if a.files and unreadable:  # named files, none readable: the line above said why (it went on "no result
            return 1  # waits in <the spool>", of a spool no file named was in)
        print(f"{PROG}: nothing to import: no result waits in {spool_dir()}{for_others}")
        return 1 if unreadable else 0
    failed = False
    for uri, mine in sorted(stores.items()):
        try:
            address.check(uri)  # a result meant for an address no store is at stays: it names that address
            rec = Recorder(uri, mine[0].experiment, import_spool=False)
            print(f"{PROG}: {import_into(rec, [e.path for e in mine])} result(s) written into {uri}")
        except (StoreError, address.BadAddress) as err:
            shown = err if isinstance(err, StoreError) else f"store {redacted(uri)}: {err}"
            elsewhere = command("sweep.spool", "import", "--tracking-uri", "URI", "FILE")
            print(
                f"{PROG}: {shown}; the results stay in {spool_dir()} ({elsewhere} writes one into another store)",
                file=sys.stderr,
            )
            failed = True
    return 1 if failed or unreadable else 0


if __name__ == "__main__":
    sys.exit(main())
