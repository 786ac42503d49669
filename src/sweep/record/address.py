"""A store's address, checked before any job and before anything is opened: the one check every command that
names a store makes (a sweep, a single run, compare, migrate, the spool's import, the UI).

MLflow takes many addresses the project cannot keep runs in, and finds out late: an in-memory SQLite store
(`sqlite://`, `sqlite:///`, `sqlite:///:memory:`) takes every run and forgets them when the command ends; a
`file:` address or a plain path is MLflow's file store, in maintenance mode, which refuses the first run after
the job; an unknown scheme or a port that is not a number fails at the first write, after the job ran; a
directory given as the SQLite file, or a symlink to nothing, is replaced by a new file; a FIFO, a device
(`sqlite:////dev/null`) or a socket is opened as one (a FIFO: for ever). `problem` names each in
one line (bad input: exit 2). `check` adds what is not input: a journal left without its database
(`sweep.record.store.orphan_journal`) and a server or database that does not answer within the timeout
(`sweep.record.remote`), each a `StoreError` (exit 1); what answers there as no MLflow tracking server does
is bad input again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional
from urllib.parse import parse_qs, urlsplit

from sweep.paths import default_tracking_uri, shown
from sweep.record import registry, remote
from sweep.record.store import StoreError, orphan_journal, redacted, special_file, sqlite_path

EXAMPLE = "sqlite:///mlruns/mlflow.db"
# the stores runs are kept in: an SQLite file, a tracking server, a database (a driver may follow: postgresql+psycopg)
SERVER_SCHEMES = ("http", "https")
DATABASE_SCHEMES = remote.DATABASE_PORTS  # scheme -> its default port
EXPECTED = f"sqlite:///PATH (e.g. {EXAMPLE}), http(s)://HOST:PORT (a tracking server) or a database, " + " ".join(
    f"{s}://..." for s in DATABASE_SCHEMES
)


DATABRICKS = ("databricks", "databricks-uc", "uc")  # MLflow's names of a Databricks workspace (no network here)


class BadAddress(ValueError):
    """The address names no store the project can keep runs in: one line (what is wrong, what to give instead)."""


def problem(uri: str) -> Optional[str]:
    """Why `uri` is not a store address the project can keep runs in (one line), or None."""
    if not uri.strip():
        return f"an empty address: expected {EXPECTED}"
    scheme = uri.partition(":")[0].lower() if ":" in uri else ""
    base = scheme.split("+", 1)[0]
    if base == "sqlite":
        return _sqlite_problem(uri)
    if (base or uri.strip().lower()) in DATABRICKS:  # MLflow's own names for a Databricks workspace, not paths
        return f"{uri} is MLflow's address of a Databricks workspace, which sweep does not keep runs in: " + (
            f"expected {EXPECTED}"
        )
    if not scheme or "/" in scheme or base == "file":
        return (
            "a directory or file: address (MLflow's file store, in maintenance mode, refuses new runs): "
            f"expected an SQLite file, sqlite:///PATH (e.g. {EXAMPLE})"
        )
    if base not in SERVER_SCHEMES and base not in DATABASE_SCHEMES:
        if registry.known(base):  # a kind added to the registry (docs/extending.md): its address is its own
            return None
        return f"unknown scheme {scheme}://: expected {EXPECTED}"
    try:
        parts = urlsplit(uri)
    except ValueError as e:  # http://[::1 (an IPv6 host's bracket left open): the store's check named no setting
        return f"not an address ({e}): expected {EXPECTED}"
    try:
        port = parts.port
    except ValueError:
        return f"the port in {parts.netloc.rpartition('@')[2]!r} is not a port: expected a number from 1 to 65535"
    if port == 0:
        return "port 0 is not a port: expected a number from 1 to 65535"
    if base in SERVER_SCHEMES and not parts.hostname:
        return f"no host: expected {base}://HOST:PORT"
    return None


def _sqlite_problem(uri: str) -> Optional[str]:
    address, _, query = uri.partition("?")
    path = address[len("sqlite:///") :]
    memory = address in ("sqlite:", "sqlite://", "sqlite:///") or parse_qs(query).get("mode") == ["memory"]
    if not memory and not uri.startswith("sqlite:///"):
        return f"expected sqlite:///PATH (three slashes, then the file's path; e.g. {EXAMPLE})"
    if memory or path == ":memory:" or path.startswith("file::memory:"):
        return (
            "an in-memory SQLite store keeps nothing once the command ends (nothing could be compared or resumed): "
            f"expected a file, sqlite:///PATH (e.g. {EXAMPLE})"
        )
    file = sqlite_path(uri)
    assert file is not None
    try:
        return _file_problem(file)
    except OSError as e:  # a name the filesystem refuses (ENAMETOOLONG): was "the store could not be checked"
        return f"{shown(file)}: {e.strerror}: name a file, sqlite:///PATH (e.g. {EXAMPLE})"


def _file_problem(file: Path) -> Optional[str]:
    """Why the SQLite file `file` cannot hold a store (None: it can, or can be made there)."""
    above = file.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():  # a file in the path: the job ran, then its result was spooled ("Not a directory")
        kind = special_file(above) or "a file"
        return f"{above} is {kind}, so {file} cannot be made: name a file in a directory, sqlite:///PATH"
    if file.is_dir():
        return f"{file} is a directory: name the store's file in it, sqlite:///{file / 'mlflow.db'}"
    if kind := special_file(file):
        return f"{file} is {kind}, not a file SQLite can keep a store in: name a file, sqlite:///PATH (e.g. {EXAMPLE})"
    if file.is_symlink() and not file.exists():
        return (
            f"{file} is a symlink to {os.readlink(file)}, which does not exist: mount or make what it points to, "
            "or name another file (the link is not replaced)"
        )
    return None


def check(uri: str, timeout_s: Optional[float] = None) -> None:
    """Raise BadAddress (bad input) or StoreError (the store is not there to use: a journal without its database,
    a server or database that does not answer within `timeout_s`, default mlflow.connect_timeout_s)."""
    why = problem(uri)
    if why:
        raise BadAddress(why)
    path = sqlite_path(uri)
    if path is not None and (journal := orphan_journal(path)):
        raise StoreError(uri, journal)
    try:
        remote.require(uri, timeout_s)
    except remote.NotMLflow as e:  # something answers there, but no store: bad input, as an unknown scheme is
        raise BadAddress(e.cause) from None


def setting_problem(configured: Optional[str]) -> Optional[str]:
    """A command's store setting (`mlflow.tracking_uri`, else $MLFLOW_TRACKING_URI, else the project's store) as
    bad input, in a config error's words naming the setting; None when its address is one the project can use."""
    uri = configured or default_tracking_uri()
    why = problem(uri)
    return None if why is None else setting_refused(configured, why)


def setting_refused(configured: Optional[str], why: str) -> str:
    """`why` the command's store setting names no store, as a config error names the setting it is in."""
    setting = "mlflow.tracking_uri" if configured else "MLFLOW_TRACKING_URI"
    return f"{setting}={redacted(configured or default_tracking_uri())} is not allowed: {why}"
