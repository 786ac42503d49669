"""The kinds of store (`sweep.record.registry.Store`), each deciding for itself what differs by kind:
- `DatabaseStore`: any store MLflow opens through its client and SQLAlchemy (PostgreSQL, MySQL, MS SQL): runs
  written one transaction each through MLflow's engine (`SqlRunWriter`); MLflow makes its tables itself.
- `SqliteStore`: an SQLite file: checked in milliseconds (`sweep.record.store`), made whole or not at all
  (`sweep.record.creation`), written through sqlite3 without importing MLflow where its schema is the one this
  MLflow writes (`sweep.record.sqlite`), read read-only where it cannot be written, whole in its one file at exit.
- `ServerStore`: a tracking server: MLflow's REST client, one request per write; it serves its own UI.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Optional

from sweep.record import creation, journal, store
from sweep.record.sqlalchemy_writer import SqlRunWriter
from sweep.record.sqlite.identity import file_identity, moved
from sweep.record.sqlite.writer import SqliteRunWriter
from sweep.record.tags import KIND_TAG, MODEL_TRAINING


class DatabaseStore:
    """A store MLflow opens through its client: a database, and the base of the other kinds."""

    remote = False

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def label(self) -> str:
        return store.redacted(self.uri)  # a single run's last line showed postgresql://sweep:<the password>@...

    def identity(self) -> str:
        return self.uri.rstrip("/")

    def exists(self) -> bool:
        return True

    def moved(self, opened: Any) -> Optional[str]:
        """Why the store is no longer the one `opened` (`file_of()` when it was opened), or None."""
        return None

    def file_of(self) -> Any:
        """What `moved` compares: a SQLite store's file (device, inode); None for a server or a database."""
        return None

    def check(self, write: bool) -> None:
        return None  # a server or database reports its own errors (`sweep.record.remote` asked it first)

    def create(self) -> None:
        return None  # MLflow's SQL store makes its tables on first use

    def explain(self, e: BaseException) -> str:
        return store.kind_of(e)

    def artifact_location(self) -> Optional[str]:
        return None

    def address(self, write: bool = True) -> str:
        return self.uri

    def client(self, write: bool = True) -> Any:
        from mlflow.tracking import MlflowClient  # noqa: PLC0415 - MLflow: seconds to import; only where a command reads or writes through it

        return MlflowClient(tracking_uri=self.address(write))

    def direct_writer(self, experiment: str) -> Any:
        return None

    def run_writer(self, client: Any, experiment: str) -> Any:
        return SqlRunWriter.for_client(client)

    def close_at_exit(self, direct: Any) -> None:
        return None

    def for_long_sweep(self, direct: Any) -> None:
        return None


class ServerStore(DatabaseStore):
    """A tracking server (http://, https://)."""

    remote = True

    def run_writer(self, client: Any, experiment: str) -> Any:
        return None  # its REST API: MLflow's SQL store (a second of imports) is not needed


class SqliteStore(DatabaseStore):
    """An SQLite file (`sqlite:///PATH`)."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        path = store.sqlite_path(uri)
        assert path is not None, uri  # `sqlite_or_database` builds this kind only for a file
        self.path: Path = path

    def label(self) -> str:
        try:
            return str(self.path.resolve().relative_to(Path.cwd()))
        except ValueError:
            return str(self.path)

    def identity(self) -> str:
        return f"sqlite:///{self.path.resolve()}"

    def exists(self) -> bool:
        return self.path.exists()

    def file_of(self) -> Any:
        return file_identity(self.path)

    def moved(self, opened: Any) -> Optional[str]:
        return moved(self.path, opened)

    def check(self, write: bool) -> None:
        store.check(self.uri, write)

    def create(self) -> None:
        if self.path.exists():
            return
        try:
            with creation.creation_lock(self.uri):  # MLflow's table creation is not concurrency-safe
                creation.create(self.uri)  # a new store: made aside, renamed into place when whole
        except store.StoreError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever MLflow or SQLAlchemy raise: one line, no traceback
            raise store.StoreError(self.uri, self.explain(e)) from e

    def explain(self, e: BaseException) -> str:
        return store.kind_of(e, self.path)

    def artifact_location(self) -> Optional[str]:
        return store.artifact_location(self.uri)

    def address(self, write: bool = True) -> str:
        return self.uri if write else store.read_uri(self.uri)

    def direct_writer(self, experiment: str) -> Any:
        """At the schema this MLflow writes: sqlite3 from the first write (its experiment made here too, when the
        name is one MLflow takes; else MLflow's client judges the name)."""
        writer = SqliteRunWriter.open(self.path, experiment)
        if writer is None and not store.experiment_name_problem(experiment):
            location = self.artifact_location()
            assert location is not None
            writer = SqliteRunWriter.create(self.path, experiment, location, {KIND_TAG: MODEL_TRAINING})
        return writer

    def run_writer(self, client: Any, experiment: str) -> Any:
        # a store MLflow has just made (or upgraded) at the known schema: sqlite3 from here on, ~5x cheaper a run
        # than SQLAlchemy; else one SQLAlchemy transaction per run
        fresh = SqliteRunWriter.open(self.path, experiment) if self.path.exists() else None
        return fresh or super().run_writer(client, experiment)

    def close_at_exit(self, direct: Any) -> None:
        journal.fold_at_exit(self.path, direct.close if direct is not None else None)  # whole in its one file

    def for_long_sweep(self, direct: Any) -> None:
        """Write-ahead log with synchronous=NORMAL: a commit no longer waits for an fsync (MLflow commits ~9 times
        per run, ~6 ms each on a slow disk), and the store still survives a crash of the process; only the last
        transactions could be lost to a power cut. Readers are unaffected. Written through sqlite3, on its own
        connection (no SQLAlchemy import); through MLflow's engine, on each connection it opens."""
        if direct is not None:
            direct.use_wal()
            return
        if getattr(SqliteStore.for_long_sweep, "on", False):
            return
        from sqlalchemy import event  # noqa: PLC0415 - SQLAlchemy loads with MLflow: only when a sweep opens its store
        from sqlalchemy.engine import Engine  # noqa: PLC0415 - SQLAlchemy loads with MLflow: only when a sweep opens its store

        def on_connect(dbapi_conn: Any, _record: Any) -> None:
            if isinstance(dbapi_conn, sqlite3.Connection):
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.close()

        event.listen(Engine, "connect", on_connect)
        SqliteStore.for_long_sweep.on = True  # type: ignore[attr-defined]


def sqlite_or_database(uri: str) -> DatabaseStore:
    """`sqlite:///PATH`: a file; any other sqlite address (a driver named, `sqlite+pysqlite:///file:...?mode=ro`):
    MLflow's SQL store as it is given."""
    return SqliteStore(uri) if store.sqlite_path(uri) is not None else DatabaseStore(uri)
