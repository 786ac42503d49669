"""The MLflow schema of an SQLite store, read without MLflow (importing it takes seconds) and without writing:
its tables, its alembic revision against the head of this MLflow's migrations, and what it holds; from these,
whether MLflow can use it, and if not, why in words a user can act on (`schema_problem`): half-made (a creation
cut short, holding no runs: removable), an upgrade cut short, an older or unknown revision, not MLflow's."""

from __future__ import annotations

import functools
import importlib.util
import re
import sqlite3
from pathlib import Path
from typing import Optional

from sweep.record.tags import CLAIMS_TAG

# how long a reader or the check waits for a lock another process holds (a sweep's write takes milliseconds)
LOCK_WAIT_S = 5.0


REMOVE = "remove it (with any -wal and -shm beside it) and run again"


def schema_problem(path: Path) -> Optional[str]:
    """Why MLflow could not use this SQLite database as its store (None: it can); `URI` in the line stands for the
    store's URI. Raises sqlite3.DatabaseError where SQLite cannot read it."""
    tables, version, runs, experiments, shown = schema_facts(path)
    head, known = mlflow_head()
    leftover = sorted(t for t in tables if t.startswith("_alembic_tmp_"))
    if not tables:
        return f"half-made: an SQLite file without tables, its creation never finished; it holds no runs: {REMOVE}"
    # another application's tables (a `runs` of its own, an alembic revision of its own): never called half-made,
    # whose advice is to remove the file
    foreign = {t for t in tables if t not in mlflow_tables() and not t.startswith(("_alembic_tmp_", "sqlite_"))}
    if not tables & {"alembic_version", "experiments", "runs"} or (
        (foreign or experiments < 0) and version not in known
    ):
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        return f"not an MLflow store (an SQLite database with the tables {shown})"
    if version == head and not leftover:
        return None
    where = f"schema revision {version or '(none)'} of MLflow's {head}" + (
        f", alembic's half-done table {leftover[0]} left" if leftover else ""
    )
    if runs == 0 and experiments == 0 and (version is None or version in known):
        return f"half-made: its creation was never finished ({where}); it holds no runs: {REMOVE}"
    holds = f"it holds {shown} run(s)"
    if leftover or version is None:
        return f"a schema upgrade was cut short ({where}; {holds}): restore it from a backup"
    if version in known:
        return (
            f"an older schema revision ({version}; this MLflow writes {head}; {holds}): back it up, then "
            "`mlflow db upgrade URI` brings it to this MLflow's"
        )
    return (
        f"a schema revision this MLflow does not know ({version}; it writes {head}; {holds}): made by a newer "
        "MLflow, which can read it"
    )


def schema_facts(path: Path) -> tuple[set[str], Optional[str], int, int, int]:
    """(its tables, its alembic revision, how many runs, how many experiments besides MLflow's Default (-1: a table
    of that name without MLflow's columns), how many runs a user has: `runs` but the deleted and the project's
    bookkeeping ones, CLAIMS_TAG), read without writing anything: a store SQLite can only open read-only (e.g. in
    a read-only directory) is read as an immutable file."""
    try:
        return _read_facts(read_only_uri(path, immutable=False))
    except sqlite3.OperationalError as e:
        if not is_read_only_error(e):
            raise
        return _read_facts(read_only_uri(path, immutable=True))


def _read_facts(uri: str) -> tuple[set[str], Optional[str], int, int, int]:
    conn = sqlite3.connect(uri, uri=True, timeout=LOCK_WAIT_S)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = runs = experiments = None
        if "alembic_version" in tables:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
            version = row[0] if row else None
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0] if "runs" in tables else 0
        if "experiments" in tables:
            try:
                experiments = conn.execute("SELECT count(*) FROM experiments WHERE experiment_id != 0").fetchone()[0]
            except sqlite3.OperationalError:  # another application's table of that name: -1
                experiments = -1
        return tables, version, runs, experiments or 0, _runs_shown(conn, runs)
    finally:
        conn.close()


def _runs_shown(conn: sqlite3.Connection, runs: int) -> int:
    """The runs MLflow's lists show but the project's bookkeeping (the claims run, a single run's holder); `runs`
    where the schema has no lifecycle stage yet."""
    if not runs:
        return 0
    try:
        return conn.execute(
            "SELECT count(*) FROM runs r WHERE r.lifecycle_stage = 'active' AND NOT EXISTS (SELECT 1 FROM tags t "
            "WHERE t.run_uuid = r.run_uuid AND t.key = ? AND t.value = 'true')",
            (CLAIMS_TAG,),
        ).fetchone()[0]
    except sqlite3.OperationalError:  # an old schema's runs have no lifecycle_stage
        return runs


def schema_version(path: Path) -> Optional[str]:
    """The store's MLflow schema revision (alembic_version; None: it has none), read without writing anything."""
    return schema_facts(path)[1]


@functools.cache
def mlflow_head() -> tuple[str, frozenset[str]]:
    """The schema revision this MLflow writes (the head of its migrations) and every revision it knows, read
    from its migration scripts' `revision =` lines rather than by importing MLflow (seconds)."""
    spec = importlib.util.find_spec("mlflow")
    assert spec is not None and spec.submodule_search_locations
    versions = Path(spec.submodule_search_locations[0]) / "store" / "db_migrations" / "versions"
    known: set[str] = set()
    parents: set[str] = set()
    for script in versions.glob("*.py"):
        with open(script, encoding="utf-8") as f:
            text = f.read(4096)  # alembic writes both lines in the script's head
        if m := re.search(r"^revision\s*=\s*['\"](\w+)['\"]", text, re.M):
            known.add(m.group(1))
        if m := re.search(r"^down_revision\s*=(.*)$", text, re.M):
            parents.update(re.findall(r"['\"](\w+)['\"]", m.group(1)))
    heads = known - parents
    assert len(heads) == 1, f"MLflow's migrations have {len(heads)} heads"
    return heads.pop(), frozenset(known)


@functools.cache
def mlflow_tables() -> frozenset[str]:
    """Every table some revision of this MLflow's schema makes: its models' `__tablename__`s and its migrations'
    `create_table` (read from the scripts, as mlflow_head reads them, not by importing MLflow)."""
    spec = importlib.util.find_spec("mlflow")
    assert spec is not None and spec.submodule_search_locations
    names: set[str] = {"alembic_version"}
    for script in (Path(spec.submodule_search_locations[0]) / "store").rglob("*.py"):
        text = script.read_text(encoding="utf-8", errors="replace")
        names.update(re.findall(r"__tablename__\s*=\s*['\"](\w+)['\"]", text))
        names.update(re.findall(r"create_table\(\s*['\"](\w+)['\"]", text))
    return frozenset(names)


def is_read_only_error(e: sqlite3.Error) -> bool:
    # SQLite's words for "this file or its directory cannot be written": a read-only WAL store cannot make its
    # shared-memory file (-shm); neither is corruption
    return any(s in str(e) for s in ("unable to open", "readonly database", "read-only"))


def read_only_uri(path: Path, immutable: bool) -> str:
    """An SQLite `file:` URI that opens `path` read-only; `immutable` also tells SQLite that nothing changes it,
    so it needs no -shm file (which a read-only directory cannot hold) and never writes. An immutable open does
    not read the -wal, so a store whose -wal still holds pages is opened plain read-only."""
    wal = Path(f"{path}-wal")
    immutable = immutable and not (wal.exists() and wal.stat().st_size > 0)
    return f"{path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if immutable else "")
