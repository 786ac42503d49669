"""The MLflow store a command writes or reads, checked before MLflow touches it.

MLflow meets a broken SQLite store with minutes of connection retries and a long traceback; these checks take
milliseconds (a lock held by another process: the few seconds of SQLite's busy timeout) and end in one line
(`StoreError`) that names the store and the cause, each its own words:
- read-only: the file or its directory cannot be written (permissions, an immutable file, a read-only mount);
- full: the disk that holds it has no room left (a probe write in its directory fails with ENOSPC);
- locked: another process holds a lock on it beyond the busy timeout;
- half-made: its creation was never finished (by an older version of this project, which let MLflow make the
  tables in place: a signal in its first second left them half made), and it holds no runs;
- another schema revision: older or newer than the one this MLflow writes (`sweep.record.sqlite.schema`);
- not an MLflow store: an SQLite database with other tables;
- corrupt, and only then: not an SQLite file, a file shorter than its own header says (truncated) whose
  write-ahead log does not hold the rest, or one SQLite itself calls malformed;
- missing, when only reading: `compare` never creates a store.
A new store is made whole or not at all (`create`): MLflow makes its tables in a file beside it, which is then
renamed into place, all under a file lock beside the store (`creation_lock`), as MLflow's table creation is not
safe against a second process creating the same store at the same moment.

Only SQLite URIs (``sqlite:///path``) are checked here; a server or another database reports its own errors.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
import stat
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

from hydra.errors import CompactHydraException

from sweep.record.sqlite.schema import (  # noqa: F401 - schema_version: part of the store's reading, named here too
    LOCK_WAIT_S,
    REMOVE,
    is_read_only_error,
    read_only_uri,
    schema_problem,
    schema_version,
)

# MLflow's limit on an experiment's name (mlflow.utils.validation.MAX_EXPERIMENT_NAME_LENGTH)
MAX_EXPERIMENT_NAME = 500
# a directory with less room than this cannot take a run (SQLite's journal, a run's rows and files)
PROBE_BYTES = 64 * 1024


class StoreError(CompactHydraException):
    """The store cannot be used: the message is one line naming the store and the cause.

    A CompactHydraException so that, raised inside a Hydra app (the sweep launcher), Hydra prints just this
    line and exits 1 instead of a traceback."""

    def __init__(self, uri: str, cause: str) -> None:
        super().__init__(f"store {redacted(uri)}: {cause}")
        self.uri = uri
        self.cause = cause

    @property
    def passing(self) -> bool:
        """Whether the cause may pass by itself (another process's lock, a full disk, a read-only file or mount:
        `kind_of`'s "locked", "full", "read-only"): a result written later may be taken, one for a damaged store
        or another schema never is."""
        return self.cause.startswith(("locked:", "full:", "read-only"))


class NoStore(StoreError):
    """Nothing has been recorded at the address a reading command was given: bad input (exit 2, as a misspelt
    study), most often a misspelt path, not a store that fails."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri, "no store there (nothing has been recorded into it)")


def redacted(uri: str, shown: str = ":***") -> str:
    """`uri` as a line may show it: a password in it (a database's address) as `***`. `shown=""`: no password,
    the address a printed command names, its password left to the environment's login (PGPASSWORD, ~/.pgpass,
    MLFLOW_TRACKING_PASSWORD)."""
    try:
        password = urlsplit(uri).password
    except ValueError:  # an address urllib cannot read (http://u:pw@[::1, a bracket left open): its login's form
        return re.sub(r"(//[^/@:]*):[^/@]*@", lambda m: f"{m[1]}{shown}@", uri, count=1)
    return uri if password is None else uri.replace(f":{password}@", f"{shown}@", 1)


JOURNALS = ("-wal", "-shm", "-journal")  # SQLite's files beside a database while it is written


def orphan_journal(path: Path) -> Optional[str]:
    """Why the store file at `path` must not be made (one line), or None: a journal of SQLite's is there without
    its database (the file was deleted or moved, its -wal left). SQLite would replay that journal onto a new store
    made under the same name, which then fails every command (duplicate rows); the journal may also hold the last
    runs of the store it belonged to."""
    if path.exists() or path.is_symlink():
        return None
    left = [f"{path.name}{s}" for s in JOURNALS if Path(f"{path}{s}").exists()]
    if not left:
        return None
    return (
        f"{' and '.join(left)} {'is' if len(left) == 1 else 'are'} there without the database {path.name} "
        f"(deleted or moved?): put the database back, or move {' and '.join(left)} aside (they may hold its "
        "last runs), then run again; no store is made under an old journal"
    )


def sqlite_path(uri: str) -> Optional[Path]:
    """The database file of a ``sqlite:///`` URI (absolute or relative), None for anything else."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///") :].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def artifact_location(tracking_uri: str) -> Optional[str]:
    """Where a new experiment keeps its artifacts: beside an SQLite store's file (MLflow's default is ./mlruns of
    whichever directory the command ran in); a server's own default elsewhere (None)."""
    db = sqlite_path(tracking_uri)
    return None if db is None else (db.parent / "artifacts").resolve().as_uri()


def absolute_uri(uri: str) -> str:
    """`uri` with a relative SQLite path made absolute against the working directory (other URIs unchanged): what
    names the store wherever a later command runs (`sqlite:///mlflow.db` means another file in another directory)."""
    path = sqlite_path(uri)
    if path is None or path.is_absolute():
        return uri
    query = uri.partition("?")[2]
    return f"sqlite:///{path.resolve()}" + (f"?{query}" if query else "")


def special_file(path: Path) -> Optional[str]:
    """What `path` is when it is there and neither a regular file nor a directory ("a FIFO", "a character
    device"...), or None. Read from its status alone: opening a FIFO waits for a writer for ever."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    kinds += ((stat.S_ISSOCK, "a socket"),)
    if kind := next((name for test, name in kinds if test(mode)), None):
        return kind
    # /proc/self/status: a regular file of size 0, called "half-made ... remove it" (the kernel's, not a store)
    return next((f"a file of the kernel's {fs}" for fs in ("/proc", "/sys") if _same_fs(path, fs)), None)


def _same_fs(path: Path, mount: str) -> bool:
    try:
        return path.stat().st_dev == os.stat(mount).st_dev
    except OSError:
        return False


def check(uri: str, write: bool) -> None:
    """Raise StoreError if the store at `uri` cannot be written (`write`) or read. A store that does not exist
    yet passes a write check when its directory can be created and written; it fails a read check."""
    path = sqlite_path(uri)
    if path is None:
        return
    if journal := orphan_journal(path):
        raise StoreError(uri, journal)
    if not path.exists():
        if not write:
            raise NoStore(uri)
        _check_dir_writable(uri, path.parent)
        return
    if kind := special_file(path):  # never opened (a FIFO blocks), never called half-made (removing /dev/null...)
        raise StoreError(uri, f"{path} is {kind}, not a file SQLite can keep a store in: name a file")
    _check_readable(uri, path)
    if write:
        try:
            with open(path, "r+b"):
                pass
        except OSError as e:
            raise StoreError(uri, f"read-only ({e.strerror})") from None
        _check_dir_writable(uri, path.parent)  # SQLite writes its journal beside the file
        _check_not_locked(uri, path)


def _check_dir_writable(uri: str, directory: Path) -> None:
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        probe_writable(existing)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreError(uri, f"full: no room left on the disk that holds {existing} ({e.strerror})") from None
        raise StoreError(uri, f"read-only: cannot write in {existing} ({e.strerror})") from None


def probe_writable(directory: Path) -> None:
    """Write PROBE_BYTES in `directory` and remove them (a full disk takes an empty file, not its data). A disk
    with less room takes part of a write without an error (a short write): the rest is written until it raises,
    else a disk with one free page passed, and Hydra's multirun.yaml after it was a 32-line traceback."""
    with tempfile.NamedTemporaryFile(dir=directory, prefix=".sweep-probe-", buffering=0) as f:
        left = memoryview(b"\0" * PROBE_BYTES)
        while left:
            left = left[f.write(left) :]


def _full(directory: Path) -> Optional[str]:
    """Why `directory` takes no data (ENOSPC, EDQUOT), or None where it does or fails for another reason."""
    try:
        probe_writable(directory)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return str(e.strerror)
    return None


def _check_not_locked(uri: str, path: Path) -> None:
    """A write transaction begun and rolled back (nothing written): fails when another process holds the store's
    write lock for longer than LOCK_WAIT_S."""
    try:
        conn = sqlite3.connect(path, timeout=LOCK_WAIT_S, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise StoreError(uri, kind_of(e, path)) from None


def _check_readable(uri: str, path: Path) -> None:
    try:
        with open(path, "rb") as f:
            header = f.read(100)
        size = path.stat().st_size
    except OSError as e:
        raise StoreError(uri, f"cannot be read ({e.strerror})") from None
    if size == 0:  # SQLite's own first step in making a store: nothing written yet
        raise StoreError(uri, f"half-made: an empty file, its creation never finished; it holds no runs: {REMOVE}")
    if not header.startswith(b"SQLite format 3\x00"):
        raise StoreError(uri, "corrupt: not an SQLite database")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if size < page_size * pages and not _wal_holds_the_rest(path, page_size, size):
        raise StoreError(uri, f"corrupt: truncated ({size} bytes, its header says {page_size * pages})")
    try:
        problem = schema_problem(path)
    except sqlite3.DatabaseError as e:
        if is_read_only_error(e):  # its -wal holds pages, which a read-only directory keeps SQLite from reading
            raise StoreError(uri, f"read-only, and SQLite cannot open it so ({e})") from None
        raise StoreError(uri, kind_of(e, path)) from None
    if problem:
        raise StoreError(uri, problem.replace("URI", uri))


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


def kind_of(e: BaseException, path: Optional[Path] = None) -> str:
    """What an error from SQLite (through SQLAlchemy or not) or the OS means for the store (its file at `path`),
    in one line led by its kind: full, locked, read-only, or corrupt (only where SQLite says the file is
    damaged). SQLite says "disk I/O error" where a full disk keeps it from growing its -shm or -wal: the store's
    directory, probed, tells that apart."""
    orig = getattr(e, "orig", None) or e
    text = cause_of(orig)
    said = str(orig)  # MLflow's own exceptions carry SQLite's words on a later line
    if isinstance(orig, OSError) and orig.errno in (errno.ENOSPC, errno.EDQUOT) or "disk is full" in said:
        return f"full: no room left on its disk ({'database or disk is full' if 'disk is full' in said else text})"
    if "database is locked" in said or "database table is locked" in said:
        return f"locked: another process holds it beyond {LOCK_WAIT_S:g} s (database is locked)"
    if is_read_only_error(orig) or isinstance(orig, OSError) and orig.errno in (errno.EROFS, errno.EACCES):
        return f"read-only ({text})"
    if isinstance(orig, sqlite3.DatabaseError) and any(w in text for w in ("malformed", "not a database")):
        return f"corrupt: {text}"
    if path is not None and (why := _full(path.parent)):
        return f"full: no room left on the disk that holds {path.parent} ({why}; SQLite: {text})"
    return text


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
    if len(text) > 1 and text[0].startswith("(raised as a result of "):  # SQLAlchemy's autoflush note: the next
        text = text[1:]  # line is the error (a write refused by `ulimit -f`: its 'disk I/O error' went unsaid)
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


def deleted_experiment(name: str, experiment_id: str) -> str:
    """Why no run may go into experiment `name`, deleted in MLflow's UI: a single run went into it, hidden from the
    UI and from compare, and a sweep was MLflow's "must be in the 'active' state"."""
    return (
        f"experiment '{name}' (id {experiment_id}) is deleted: restore it (MLflow's UI, or `mlflow experiments "
        f"restore --experiment-id {experiment_id}`) or choose another mlflow.experiment"
    )


def sqlite_experiment_deleted(uri: str, name: str) -> Optional[str]:
    """`deleted_experiment`'s line where `uri`'s SQLite file holds experiment `name` deleted, read with sqlite3
    (no MLflow import: a single run's check before its job); None otherwise, or where it cannot be read."""
    path = sqlite_path(uri)
    if path is None or not path.is_file():
        return None
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=0)) as conn:
            row = conn.execute(
                "SELECT experiment_id, lifecycle_stage FROM experiments WHERE name = ?", (name,)
            ).fetchone()
    except sqlite3.Error:  # another schema, a lock: the recording's own checks say
        return None
    return deleted_experiment(name, str(row[0])) if row is not None and row[1] != "active" else None
