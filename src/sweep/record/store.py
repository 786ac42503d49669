"""The MLflow store a command writes or reads, checked before MLflow touches it.

MLflow meets a broken SQLite store with minutes of connection retries and a long traceback; these checks take
milliseconds and end in one line (`StoreError`) that names the store and the cause:
- corrupt: not an SQLite file, a file shorter than its own header says (truncated) whose write-ahead log does
  not hold the rest, or no MLflow schema;
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


def absolute_uri(uri: str) -> str:
    """`uri` with a relative SQLite path made absolute against the working directory (other URIs unchanged): what
    names the store wherever a later command runs (`sqlite:///mlflow.db` means another file in another directory)."""
    path = sqlite_path(uri)
    if path is None or path.is_absolute():
        return uri
    query = uri.partition("?")[2]
    return f"sqlite:///{path.resolve()}" + (f"?{query}" if query else "")


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
    if size < page_size * pages and not _wal_holds_the_rest(path, page_size, size):
        raise StoreError(uri, f"corrupt: truncated ({size} bytes, its header says {page_size * pages})")
    try:
        schema_version(path)
    except sqlite3.DatabaseError as e:
        if _is_read_only_error(e):  # its -wal holds pages, which a read-only directory keeps SQLite from reading
            raise StoreError(uri, f"read-only, and SQLite cannot open it so ({e})") from None
        raise StoreError(uri, f"corrupt: {e}") from None


def _wal_holds_the_rest(path: Path, page_size: int, size: int) -> bool:
    """Whether the store's write-ahead log (`<file>-wal`) holds every page the main file lacks.

    In WAL mode committed pages live in the -wal until a checkpoint copies them into the main file; a checkpoint
    cut short (a full disk) leaves a main file shorter than its header says while SQLite reads a whole database.
    Read as SQLite reads it (its file format, section 4): the frames whose salts match the log's header, up to
    the last commit frame, which also gives the database's size in pages."""
    try:
        with open(f"{path}-wal", "rb") as f:
            wal_size = os.fstat(f.fileno()).st_size
            head = f.read(32)
            if len(head) < 32 or int.from_bytes(head[:4], "big") not in (0x377F0682, 0x377F0683):
                return False
            if int.from_bytes(head[8:12], "big") != page_size:
                return False
            frames: list[int] = []  # the page each frame holds
            n_committed = db_pages = 0
            while f.tell() + 24 + page_size <= wal_size and (frame := f.read(24))[8:16] == head[16:24]:
                frames.append(int.from_bytes(frame[:4], "big"))
                if commit := int.from_bytes(frame[4:8], "big"):
                    n_committed, db_pages = len(frames), commit
                f.seek(page_size, os.SEEK_CUR)
    except OSError:
        return False
    in_file = size // page_size
    need = range(in_file + 1, db_pages + 1)
    return db_pages > 0 and len(set(frames[:n_committed]).intersection(need)) == len(need)


def schema_version(path: Path) -> Optional[str]:
    """The store's MLflow schema revision (alembic_version), read without writing anything (a store SQLite can
    only open read-only, e.g. in a read-only directory, is read as an immutable file)."""
    try:
        return _schema_version(path, read_only_uri(path, immutable=False))
    except sqlite3.OperationalError as e:
        if not _is_read_only_error(e):
            raise
        return _schema_version(path, read_only_uri(path, immutable=True))


def _is_read_only_error(e: sqlite3.Error) -> bool:
    # SQLite's words for "this file or its directory cannot be written": a read-only WAL store cannot make its
    # shared-memory file (-shm); neither is corruption
    return any(s in str(e) for s in ("unable to open", "readonly database", "read-only"))


def _schema_version(path: Path, uri: str) -> Optional[str]:
    conn = sqlite3.connect(uri, uri=True, timeout=5)
    try:
        try:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                raise sqlite3.DatabaseError("no MLflow tables (not an MLflow store)") from None
            raise
        return row[0] if row else None
    finally:
        conn.close()


def read_only_uri(path: Path, immutable: bool) -> str:
    """An SQLite `file:` URI that opens `path` read-only; `immutable` also tells SQLite that nothing changes it,
    so it needs no -shm file (which a read-only directory cannot hold) and never writes. An immutable open does
    not read the -wal, so a store whose -wal still holds pages is opened plain read-only."""
    wal = Path(f"{path}-wal")
    immutable = immutable and not (wal.exists() and wal.stat().st_size > 0)
    return f"{path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")


def read_uri(uri: str) -> str:
    """The URI a reader (compare, the UI) hands MLflow for the store at `uri`: `uri` itself, or for an SQLite
    store this process cannot write (file, directory or mount read-only) one that opens it read-only, since MLflow
    would open it for writing and fail with `unable to open database file`."""
    path = sqlite_path(uri)
    if path is None or not path.exists():
        return uri
    try:
        check(uri, write=True)
        return uri
    except StoreError:
        # `sqlite+pysqlite`: MLflow makes the parent directory of a `sqlite:///` path, here `file:...` in the cwd
        return f"sqlite+pysqlite:///{read_only_uri(path, immutable=True)}&uri=true"


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
