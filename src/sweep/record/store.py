"""The MLflow store a command writes or reads, checked before MLflow touches it.

MLflow meets a broken SQLite store with minutes of connection retries and a long traceback; these checks take
milliseconds and end in one line (`StoreError`) that names the store and the cause:
- corrupt: not an SQLite file, a file shorter than its own header says (truncated), or no MLflow schema;
- read-only: the file or its directory cannot be written (permissions, an immutable file, a read-only mount);
- missing, when only reading: `compare` never creates a store.
The first creation of a store is serialised by a file lock beside it (`creation_lock`): MLflow's table
creation is not safe against a second process creating the same store at the same moment.

Only SQLite URIs (``sqlite:///path``) are checked here; a server or another database reports its own errors.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Iterator, Optional

from hydra.errors import CompactHydraException

# MLflow's limit on an experiment's name (mlflow.utils.validation.MAX_EXPERIMENT_NAME_LENGTH)
MAX_EXPERIMENT_NAME = 500


class StoreError(CompactHydraException):
    """The store cannot be used: the message is one line naming the store and the cause.

    A CompactHydraException so that, raised inside a Hydra app (the sweep launcher), Hydra prints just this
    line and exits 1 instead of a traceback."""

    def __init__(self, uri: str, cause: str) -> None:
        super().__init__(f"store {uri}: {cause}")
        self.uri = uri
        self.cause = cause


def sqlite_path(uri: str) -> Optional[Path]:
    """The database file of a ``sqlite:///`` URI (absolute or relative), None for anything else."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///") :].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def check(uri: str, write: bool) -> None:
    """Raise StoreError if the store at `uri` cannot be written (`write`) or read. A store that does not exist
    yet passes a write check when its directory can be created and written; it fails a read check."""
    path = sqlite_path(uri)
    if path is None:
        return
    if not path.exists():
        if not write:
            raise StoreError(uri, "no store there (nothing has been recorded into it)")
        _check_dir_writable(uri, path.parent)
        return
    _check_readable(uri, path)
    if write:
        try:
            with open(path, "r+b"):
                pass
        except OSError as e:
            raise StoreError(uri, f"read-only ({e.strerror})") from None
        _check_dir_writable(uri, path.parent)  # SQLite writes its journal beside the file


def _check_dir_writable(uri: str, directory: Path) -> None:
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".sweep-probe-"):
            pass
    except OSError as e:
        raise StoreError(uri, f"read-only: cannot write in {existing} ({e.strerror})") from None


def _check_readable(uri: str, path: Path) -> None:
    try:
        with open(path, "rb") as f:
            header = f.read(100)
        size = path.stat().st_size
    except OSError as e:
        raise StoreError(uri, f"cannot be read ({e.strerror})") from None
    if size == 0:
        raise StoreError(uri, "corrupt: an empty file")
    if not header.startswith(b"SQLite format 3\x00"):
        raise StoreError(uri, "corrupt: not an SQLite database")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if size < page_size * pages:
        raise StoreError(uri, f"corrupt: truncated ({size} bytes, its header says {page_size * pages})")
    try:
        schema_version(path)
    except sqlite3.DatabaseError as e:
        raise StoreError(uri, f"corrupt: {e}") from None


def schema_version(path: Path) -> Optional[str]:
    """The store's MLflow schema revision (alembic_version), read without writing anything."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        try:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                raise sqlite3.DatabaseError("no MLflow tables (not an MLflow store)") from None
            if "unable to open" not in str(e):
                raise
            row = None  # a WAL store in a read-only directory: MLflow's own open decides
        return row[0] if row else None
    finally:
        conn.close()


def cause_of(e: BaseException) -> str:
    """One line for an exception from MLflow, SQLAlchemy or the OS: its first line, without SQLAlchemy's
    statement dump, at most 300 characters."""
    text = str(getattr(e, "orig", None) or e).strip().splitlines()
    line = text[0] if text else type(e).__name__
    return line if len(line) <= 300 else line[:297] + "..."


def experiment_name_problem(name: object) -> Optional[str]:
    """Why MLflow would refuse this experiment name (None: it would not): a bad input, refused before any job."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_EXPERIMENT_NAME:
        shown = name if not isinstance(name, str) or len(name) <= 40 else f"{name[:40]}... ({len(name)} characters)"
        return (
            f"mlflow.experiment={shown!s} is not allowed: expected a name of 1 to {MAX_EXPERIMENT_NAME} "
            "characters (MLflow's limit)"
        )
    return None


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
