"""Writes one finished run into MLflow's SQL store in a single transaction.

The client path costs four store calls per run (create_run, log_batch, set_terminated, log_artifacts), each
its own session, queries and commit: ~35 ms of launcher CPU per run on a 2-core machine, more than the sweep
launcher's whole per-job budget. A finished job's run is known in full when its result arrives, so it can be
inserted at once into the store's own tables: ~2 ms, and a run is never visible half-written.

Two writers share the rows (`run_rows`):
- `SqlRunWriter` (`sweep.record.sqlalchemy_writer`) runs them through the SQLAlchemy engine of MLflow's own store
  object, with MLflow's own checks (``_validate_batch_log_data``): any SQL database, once MLflow is imported.
- `SqliteRunWriter` (here) runs them through Python's sqlite3 without importing MLflow at all. Importing MLflow's SQL
  store costs seconds (it pulls in its GenAI scorers, FastAPI, pyarrow, pandas), far more than a single job; so
  a single run into an existing SQLite store whose schema is the revision this module was checked against
  (`KNOWN_SCHEMA`), with an existing experiment, takes this path. Anything else (a new store, another schema
  revision, a name MLflow's rules might refuse) goes through MLflow. A sweep's parent run (opened RUNNING,
  closed with its totals) and the reads and tags of its last line (`sweep.record.sqlite.client`) take it too.

tests/test_sql_run_writer.py checks that a run written either way reads back exactly like one written through
MlflowClient (info, params, metrics and their history, tags, artifacts), that `KNOWN_SCHEMA` is the schema the
installed MLflow creates and that the value rules restated here match MLflow's: an MLflow upgrade that changes
the tables fails a test instead of corrupting a store.
"""

from __future__ import annotations

import contextlib
import math
import os
import posixpath
import re
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional
from urllib.parse import unquote, urlparse

from sweep.record.sqlite.identity import file_identity, moved

# The alembic revision of MLflow's tracking schema whose tables `run_rows` fills (MLflow 3.7's head).
KNOWN_SCHEMA = "dc11669786a5"
# MLflow's rules for keys and values (mlflow.utils.validation), restated to check without importing MLflow;
# a run that does not plainly pass them goes through MLflow, which says what is wrong.
MAX_KEY_LEN, MAX_PARAM_LEN, MAX_TAG_LEN = 250, 6000, 8000
_KEY = re.compile(r"^[/\w.\- :]*$")
MLFLOW_RUN_NAME, MLFLOW_USER = "mlflow.runName", "mlflow.user"
ARTIFACTS_FOLDER = "artifacts"  # SqlAlchemyStore.ARTIFACTS_FOLDER_NAME
MAX_FLOAT = 1.7976931348623157e308
# an experiment's longest name, and its artifact location's (MLflow's default; its environment variable changes it)
MAX_EXPERIMENT_NAME_LEN, MAX_ARTIFACT_LOCATION_LEN = 500, 2048
ARTIFACT_LOCATION_ENV = "MLFLOW_ARTIFACT_LOCATION_MAX_LENGTH"
# an experiment tag's longest value (mlflow.utils.validation): the UI's saved view (`sweep.report.ui`) must fit
MAX_EXPERIMENT_TAG_LEN = 20000

Metric = tuple[str, float, int, int]  # key, value, timestamp (ms), step


@contextlib.contextmanager
def write_transaction(path: Path) -> Iterator[sqlite3.Connection]:
    """One write transaction on a connection of its own, begun at once (`BEGIN IMMEDIATE`: SQLite lets one writer
    in at a time, so what it reads stays true until it commits), rolled back on any exception."""
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


def new_run_id() -> str:
    return uuid.uuid4().hex  # as SqlAlchemyStore.create_run makes them


def sanitize(value: float) -> tuple[bool, float]:
    """(is_nan, value) as MLflow's SQL store keeps a metric: NaN as 0 with a flag, infinities as +-max float."""
    if math.isnan(value):
        return True, 0
    if math.isinf(value):
        return False, MAX_FLOAT if value > 0 else -MAX_FLOAT
    return False, value


def plainly_valid(tags: dict[str, str], params: list[tuple[str, str]], metrics: list[Metric]) -> bool:
    """True when every key and value passes MLflow's rules as restated here (False: let MLflow judge)."""
    for key in [*tags, *(k for k, _ in params), *(m[0] for m in metrics)]:
        norm = posixpath.normpath(key)
        if (
            not key
            or len(key) > MAX_KEY_LEN
            or not _KEY.match(key)
            or norm != key
            or norm.startswith("..")
            or norm.startswith("/")
        ):
            return False
    return (
        all(len(v) <= MAX_PARAM_LEN for _, v in params)
        and all(len(v) <= MAX_TAG_LEN for v in tags.values())
        and all(isinstance(m[1], float) for m in metrics)
    )


def artifact_uri(root: str, run_id: str) -> str:
    return f"{root.rstrip('/')}/{run_id}/{ARTIFACTS_FOLDER}"  # mlflow.utils.uri.append_to_uri_path, for paths


def local_dir(uri: str) -> Optional[Path]:
    """The directory of a file:// (or plain path) artifact URI; None for a remote one."""
    if uri.startswith("file://"):
        return Path(unquote(urlparse(uri).path))
    return Path(uri) if "://" not in uri else None


def run_rows(
    experiment_id: str,
    run_id: str,
    run_name: str,
    status: str,
    start_ms: int,
    end_ms: int,
    tags: dict[str, str],
    params: list[tuple[str, str]],
    metrics: list[Metric],
    artifact_uri: str,
) -> dict[str, list[dict[str, Any]]]:
    """The rows of one terminated run, by table: runs, tags, params, metrics, latest_metrics."""
    tags = {**tags, MLFLOW_RUN_NAME: run_name}
    rows = []
    latest: dict[str, tuple] = {}
    for key, value, timestamp, step in metrics:
        is_nan, value = sanitize(value)
        rows.append(
            {"key": key, "value": value, "timestamp": timestamp, "step": step, "is_nan": is_nan, "run_uuid": run_id}
        )
        order = (step, timestamp, value)  # MLflow's rule for the latest value of a key
        if key not in latest or order > latest[key][0]:
            latest[key] = (order, rows[-1])
    run = {
        "run_uuid": run_id,
        "name": run_name,
        "artifact_uri": artifact_uri,
        "experiment_id": int(experiment_id),
        "source_type": "UNKNOWN",
        "source_name": "",
        "entry_point_name": "",
        "user_id": tags.get(MLFLOW_USER, "unknown"),
        "status": status,
        "start_time": start_ms,
        "end_time": end_ms,
        "deleted_time": None,
        "source_version": "",
        "lifecycle_stage": "active",
    }
    return {
        "runs": [run],
        "tags": [{"key": k, "value": v, "run_uuid": run_id} for k, v in tags.items()],
        "params": [{"key": k, "value": v, "run_uuid": run_id} for k, v in params],
        "metrics": rows,
        "latest_metrics": [r for _, r in latest.values()],
    }


class SqliteRunWriter:
    """Through Python's sqlite3, without importing MLflow: for a SQLite store at `KNOWN_SCHEMA`."""

    direct = True  # writes without MLflow: the recorder takes a sweep's start, claims, end and resume through it

    def __init__(self, path: Path, experiment_id: str, artifact_root: str) -> None:
        self.path = path
        self.experiment_id = experiment_id
        self.artifact_root = artifact_root
        self._conn: Optional[sqlite3.Connection] = None
        self._file: Optional[tuple[int, int]] = None  # the store file the connection opened (device, inode)
        self._lost: Optional[OSError] = None  # that file was removed or replaced: every later write fails so

    @classmethod
    def open(cls, path: Path, experiment: str) -> Optional["SqliteRunWriter"]:
        """A writer for `experiment` of the store at `path`, or None when this store needs MLflow (another
        schema revision, no such active experiment, artifacts not on a local disk)."""
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
            try:
                if conn.execute("SELECT version_num FROM alembic_version").fetchone() != (KNOWN_SCHEMA,):
                    return None
                row = conn.execute(
                    "SELECT experiment_id, artifact_location FROM experiments WHERE name = ? AND "
                    "workspace = 'default' AND lifecycle_stage = 'active'",
                    (experiment,),
                ).fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            return None
        if row is None or not row[1] or local_dir(row[1]) is None:
            return None
        return cls(path, str(row[0]), row[1])

    @classmethod
    def create(
        cls, path: Path, experiment: str, artifact_location: str, tags: dict[str, str]
    ) -> Optional["SqliteRunWriter"]:
        """`experiment` made as MlflowClient.create_experiment makes it (a sweep's first into an existing store),
        then its writer; None when this store needs MLflow (another schema revision, a deleted experiment of that
        name, a name, location or tag MLflow's rules might refuse)."""
        if (
            not 1 <= len(experiment) <= MAX_EXPERIMENT_NAME_LEN
            or ARTIFACT_LOCATION_ENV in os.environ
            or len(artifact_location) > MAX_ARTIFACT_LOCATION_LEN
            or local_dir(artifact_location) is None
            or any(len(v) > MAX_EXPERIMENT_TAG_LEN or not plainly_valid({k: ""}, [], []) for k, v in tags.items())
        ):
            return None
        try:
            with write_transaction(path) as conn:  # the name looked up and taken in one write transaction
                known = conn.execute("SELECT version_num FROM alembic_version").fetchone() == (KNOWN_SCHEMA,)
                taken = conn.execute(
                    "SELECT 1 FROM experiments WHERE name = ? AND workspace = 'default'", (experiment,)
                ).fetchone()
                if known and taken is None:
                    now = int(time.time() * 1000)
                    eid = conn.execute(
                        "INSERT INTO experiments (name, artifact_location, lifecycle_stage, creation_time, "
                        "last_update_time, workspace) VALUES (?, ?, 'active', ?, ?, 'default')",
                        (experiment, artifact_location, now, now),
                    ).lastrowid
                    conn.executemany(
                        'INSERT INTO experiment_tags ("key", value, experiment_id) VALUES (?, ?, ?)',
                        [(k, v, eid) for k, v in tags.items()],
                    )
        except sqlite3.Error:
            return None
        return cls.open(path, experiment)  # made here or by another sweep meanwhile; a deleted one: None

    def artifact_dir(self, experiment_id: str, run_id: str) -> Optional[Path]:
        return local_dir(artifact_uri(self.artifact_root, run_id))

    def finished(self, tag: str, values: Iterable[str]) -> Optional[dict[str, str]]:
        """Resume without importing MLflow: tag value -> the id of the newest active FINISHED run of this
        experiment carrying it, as MLflow's search (`tags.<tag> = value and status = 'FINISHED'`, newest first)
        finds it; None when the store cannot be read here (MLflow's client then says why)."""
        values = list(values)
        found: dict[str, str] = {}
        try:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
            try:
                for i in range(0, len(values), 500):  # within SQLite's limit on bound parameters
                    chunk = values[i : i + 500]
                    rows = conn.execute(
                        "SELECT t.value, r.run_uuid FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                        "WHERE r.experiment_id = ? AND r.status = 'FINISHED' AND r.lifecycle_stage = 'active' "
                        f"AND t.key = ? AND t.value IN ({', '.join('?' * len(chunk))}) "
                        "ORDER BY r.start_time DESC, r.run_uuid",
                        (int(self.experiment_id), tag, *chunk),
                    )
                    for value, run_id in rows:
                        found.setdefault(value, run_id)
            finally:
                conn.close()
        except sqlite3.Error:
            return None
        return found

    def write(
        self,
        experiment_id: str,
        run_id: str,
        run_name: str,
        status: str,
        start_ms: int,
        end_ms: int,
        tags: dict[str, str],
        params: list[tuple[str, str]],
        metrics: list[Metric],
    ) -> None:
        rows = run_rows(
            experiment_id,
            run_id,
            run_name,
            status,
            start_ms,
            end_ms,
            tags,
            params,
            metrics,
            artifact_uri(self.artifact_root, run_id),
        )
        with self._transaction() as conn:
            for table, values in rows.items():
                if values:
                    cols = list(values[0])
                    names = ", ".join(f'"{c}"' for c in cols)  # "key" is an SQL keyword
                    conn.executemany(
                        f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(cols))})",
                        [tuple(v[c] for c in cols) for v in values],
                    )

    # -- a run opened and closed later (a sweep's parent), and tags set on their own ----------------------
    def _db(self) -> sqlite3.Connection:
        """The writer's one connection: autocommit off, so `with conn` is one transaction. WAL stores (the sweep
        launcher's) commit without waiting for fsync, as the launcher's own connections do; others keep SQLite's
        default."""
        if self._lost is not None:
            raise self._lost
        if self._conn is None:
            self._conn = sqlite3.connect(str(self.path), timeout=30)
            self._file = file_identity(self.path)
            if self._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                self._conn.execute("PRAGMA synchronous=NORMAL")
        return self._conn

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, then the store's path checked to be still the file it went to: a store file
        removed or replaced mid-sweep took every later run into the unlinked file, the sweep saying '24 done' and
        exit 0 with nothing left on disk. The run just written is then kept in the spool, and the command fails."""
        conn = self._db()
        with conn:
            yield conn
        if why := moved(self.path, self._file):
            self.close()
            self._lost = OSError(why)
            raise self._lost

    def close(self) -> None:
        """Close the writer's connection (the command ends: `sweep.record.journal`); a later write opens another."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def use_wal(self) -> None:
        """WAL with synchronous=NORMAL from here on (the sweep launcher's choice: `sweep.record.session`)."""
        conn = self._db()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")

    @staticmethod
    def _insert(conn: sqlite3.Connection, rows: dict[str, list[dict[str, Any]]]) -> None:
        for table, values in rows.items():
            if values:
                cols = list(values[0])
                names = ", ".join(f'"{c}"' for c in cols)
                conn.executemany(
                    f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(cols))})",
                    [tuple(v[c] for c in cols) for v in values],
                )

    def start_run(
        self, run_id: str, run_name: str, start_ms: int, tags: dict[str, str], params: list[tuple[str, str]]
    ) -> None:
        """A RUNNING run with its tags and params, as MlflowClient.create_run then log_batch(params) leave it."""
        rows = run_rows(
            self.experiment_id,
            run_id,
            run_name,
            "RUNNING",
            start_ms,
            None,  # type: ignore[arg-type]
            tags,
            params,
            [],
            artifact_uri(self.artifact_root, run_id),
        )
        with self._transaction() as conn:
            self._insert(conn, rows)

    def end_run(self, run_id: str, status: str, end_ms: int, metrics: list[Metric]) -> None:
        """log_batch(metrics) of keys the run has not logged yet, then set_terminated, in one transaction."""
        rows = run_rows(self.experiment_id, run_id, "", status, 0, end_ms, {}, [], metrics, "")
        with self._transaction() as conn:
            self._insert(conn, {"metrics": rows["metrics"], "latest_metrics": rows["latest_metrics"]})
            done = conn.execute(
                "UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ? AND lifecycle_stage = 'active'",
                (status, end_ms, run_id),
            )
            if done.rowcount != 1:
                raise sqlite3.OperationalError(f"no active run {run_id}")

    def set_tag(self, run_id: str, key: str, value: str) -> None:
        with self._transaction() as conn:
            conn.execute('INSERT OR REPLACE INTO tags ("key", value, run_uuid) VALUES (?, ?, ?)', (key, value, run_id))

    def set_experiment_tag(self, key: str, value: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                'INSERT OR REPLACE INTO experiment_tags ("key", value, experiment_id) VALUES (?, ?, ?)',
                (key, value, int(self.experiment_id)),
            )
