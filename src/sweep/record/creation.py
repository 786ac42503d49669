"""A new SQLite store, made whole or not at all, and never under another process's feet.

MLflow makes a store's tables in some 60 schema migrations (a second or more; many on a loaded machine), leaving
its half-done tables behind when cut short, and its creation is not safe against a second process creating the
same store at the same moment. So a new store is made in a file beside it (`.<name>.creating-<pid>`), then synced
and renamed into place, all under a file lock beside the store (`creation_lock`). MLflow makes it, in a process of
its own, the first time this MLflow's schema is made; that store is kept as a template
(`sweep.record.sqlite.template`), and every later new store is the template copied (milliseconds).

MLflow's making runs in a child process so that a signal to this one is never lost and never a traceback: this
process only waits for the child, and a stop signal (Ctrl-C, SIGTERM, SIGHUP, Ctrl-\\) stops the making there (the
child is killed, its file removed), with one line and 128+n. Made in this process, a signal's KeyboardInterrupt could
land inside a callback SQLAlchemy runs (a weakref's), where Python only prints it ("Exception ignored in ...") and
goes on: the sweep then ran all its jobs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator, NoReturn

from hydra_plugins.sweep_launcher.api import SIGNALS
from sweep.record.sqlite import template
from sweep.record.store import StoreError, artifact_location, orphan_journal, sqlite_path

# the child: MLflow's SQL store opened on the file given makes its tables and its Default experiment (artifacts
# beside the store), the last connection folds the -wal in, the file is synced
MAKE = """
import os, sqlite3, sys
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
aside, artifacts = sys.argv[1], sys.argv[2]
SqlAlchemyStore(f"sqlite:///{aside}", artifacts).engine.dispose()
conn = sqlite3.connect(aside)
try:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
finally:
    conn.close()
fd = os.open(aside, os.O_RDONLY)
try:
    os.fsync(fd)
finally:
    os.close(fd)
"""


@contextlib.contextmanager
def creation_lock(uri: str) -> Iterator[None]:
    """Hold an exclusive lock beside the store while it may be created (no-op for non-SQLite stores)."""
    path = sqlite_path(uri)
    if path is None:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise StoreError(uri, f"read-only: cannot create the store's directory or lock ({e.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class MakingFailed(Exception):
    """The child that made the tables failed: its last line (MLflow's or SQLite's words)."""


def create(uri: str) -> None:
    """Make the SQLite store at `uri` if it is not there, whole or not at all. Call under `creation_lock`: a
    creating file found then is one a killed process left, and is removed. Raises StoreError (a dangling symlink,
    a journal without its database) or MakingFailed; a signal: one line, SystemExit(128+n)."""
    path = sqlite_path(uri)
    if path is None:
        return
    for stale in path.parent.glob(f".{path.name}.creating-*"):
        stale.unlink(missing_ok=True)
    if path.exists():
        return
    if path.is_symlink():  # a link to nothing (a disk not mounted): the rename below would replace the link
        raise StoreError(uri, f"{path} is a symlink to {os.readlink(path)}, which does not exist: nothing made")
    if journal := orphan_journal(path):
        raise StoreError(uri, journal)
    aside = path.parent / f".{path.name}.creating-{os.getpid()}"
    cut: list[int] = []  # the signal that stops the making, noted where it came
    waiting = [False]  # while this process waits for the child, a signal raises there (else it is only noted)
    previous = _on_signals(cut, waiting)
    try:
        kept = template.usable()
        if kept is not None:  # milliseconds: a signal here is noted, and acted on once the store is in place
            template.copy_into(kept, aside, str(artifact_location(uri)))
        else:
            _make(aside, str(artifact_location(uri)), waiting)
            template.keep(aside)  # the next new store is a copy of this one
        os.rename(aside, path)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename itself on disk
        finally:
            os.close(fd)
    except KeyboardInterrupt:
        _interrupted(uri, cut[0] if cut else signal.SIGINT, "nothing made")
    finally:
        for s, h in previous.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)  # None: a handler not set from Python
        for leftover in (aside, *(Path(f"{aside}{s}") for s in ("-journal", "-wal", "-shm"))):
            leftover.unlink(missing_ok=True)
    if cut:  # it came outside the wait for MLflow's making (the copy, the rename, the handlers put back): acted on here
        _interrupted(uri, cut[0], "the store is made" if path.exists() else "nothing made")


def _make(aside: Path, artifacts: str, waiting: list[bool]) -> None:
    """MLflow makes the store at `aside`, in a child process (`MAKE`) that this one waits for; a signal in that wait
    (KeyboardInterrupt, `_on_signals`) kills the child, whose half-made tables the caller removes."""
    # the signals wait while the child is forked (a child started and not yet ours to kill would be left); it
    # keeps them blocked: this process stops it, with SIGKILL
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", MAKE, str(aside), artifacts],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    waiting[0] = True
    try:
        _, err = child.communicate()
    except KeyboardInterrupt:
        child.kill()  # the tables half made: nothing of them may stay
        child.wait()
        raise
    finally:
        waiting[0] = False
    if child.returncode != 0:
        last = [ln for ln in err.strip().splitlines() if ln.strip()]
        raise MakingFailed(last[-1] if last else f"the making process exited {child.returncode}")


def _interrupted(uri: str, signum: int, made: str) -> NoReturn:
    """A signal while the store was made: one line, exit 128+n (never a KeyboardInterrupt that a caller would
    take for Ctrl-C)."""
    name = signal.Signals(signum).name
    print(f"sweep: interrupted by {name} while making the store {uri}: {made}", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum) from None


def _on_signals(cut: list[int], waiting: list[bool]) -> dict[int, Any]:
    """While a store is made: the stop signals noted in `cut`, and raised as KeyboardInterrupt while
    this process waits for the child (`waiting`; SIGTERM and SIGHUP would otherwise end it with no line). Outside
    that wait one is only noted: raised as the handlers are put back, it left `create` as a bare KeyboardInterrupt,
    which the launcher took for Ctrl-C (SIGTERM as the store was renamed into place: exit 130). Returns the
    handlers they replace (main thread only)."""

    def handler(signum: int, frame: Any) -> None:
        if not cut:
            cut.append(signum)
        if waiting[0]:
            raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, handler) for s in SIGNALS}
