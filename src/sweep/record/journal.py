"""An SQLite store's write-ahead log folded into its file when the command that wrote it ends.

A sweep writes its store in WAL mode (`sweep.record.session`): committed pages sit in `mlflow.db-wal` until a
checkpoint copies them into `mlflow.db`. SQLite checkpoints and deletes the -wal (and the -shm) when the last
connection to the database closes; a process that ends without closing its connection leaves them, and a user who
copies or keeps only `mlflow.db` loses the runs still in the -wal. So each command that opened an SQLite store to
write closes its connections at exit, then folds the -wal in itself (`PRAGMA wal_checkpoint(TRUNCATE)`) on a
connection that waits for no one: where no other process has the store open, closing that connection removes
the -wal and -shm; where another does (a second sweep), the checkpoint copies what it can and SQLite leaves the
rest to the store's last connection, as it promises. A write that failed or a store that is gone is left as it
is: SQLite recovers a -wal at the store's next opening.
"""

from __future__ import annotations

import atexit
import os
import sqlite3
from pathlib import Path
from typing import Callable, Optional

_stores: dict[Path, list[Callable[[], None]]] = {}  # store file -> this process's connections' closers
_pid: Optional[int] = None  # the process that registered (a forked child does not fold its parent's stores)


def fold_at_exit(path: Path, close: Optional[Callable[[], None]] = None) -> None:
    """When this process ends: `close` (this process's connection to the store at `path`), then `fold(path)`."""
    global _pid
    if _pid != os.getpid():
        _stores.clear()
        _pid = os.getpid()
        atexit.register(fold_all)
    closers = _stores.setdefault(path.resolve(), [])
    if close is not None:
        closers.append(close)


def fold_all() -> None:
    """Every store this process registered: its connections closed, its -wal folded into its file."""
    if _pid != os.getpid():
        return
    for path, closers in _stores.items():
        for close in closers:
            close()
        fold(path)
    _stores.clear()


def fold(path: Path) -> None:
    """Copy the -wal of the store at `path` into its file and empty it, if no other connection is writing or
    reading an older snapshot (then it is left to the last connection). Never makes a file: `mode=rw`."""
    if not Path(f"{path}-wal").exists():
        return
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=0)
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()  # the last connection to the store: SQLite removes the -wal and -shm
    except sqlite3.Error:
        pass  # busy, read-only, gone, a full disk: the -wal stays whole, read at the store's next opening
