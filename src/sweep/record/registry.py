"""The one place that decides what kind of store an address names, as MLflow decides it
(`mlflow/tracking/_tracking_service/registry.py`: a builder per URI scheme, asked once per URI).

`open_store(uri)` picks the kind by the URI's scheme and returns a `Store`: what differs by kind in what the project
does with a store (check it, make it, explain its errors, choose the writer of a sweep's runs, open it to read).
The writes themselves are made in record/ alone: a sweep's (`recorder`, `claims`, `session`), and those on runs
already recorded (`writes`: tags, files, figures; `copy`: runs copied into it), on the client the store opened.
Every other module asks that object, never what kind it is. The kinds (`sweep.record.kinds`): an SQLite file
(written without MLflow where its schema is known), a database through SQLAlchemy, a tracking server. A new kind
is one `register` call (docs/extending.md, "Add a store").
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

from sweep.record import kinds


class Store(Protocol):
    """A store, as the project uses it. `remote`: it answers over HTTP, so it serves its own UI and a long sweep
    writes its runs in the background (each write a round trip)."""

    uri: str
    remote: bool

    def label(self) -> str:
        """The store as a user finds it (its file from the current directory, else its address)."""

    def identity(self) -> str:
        """What names this store wherever a command runs (an SQLite file: its resolved path), to tell two apart."""

    def exists(self) -> bool:
        """Whether there is a store there to read (a server or database: assumed, it answers for itself)."""

    def check(self, write: bool) -> None:
        """Raise StoreError (one line) if it cannot be written (`write`) or read; milliseconds."""

    def create(self) -> None:
        """Make it whole if it is not there (nothing half-made); a no-op where MLflow's store makes itself."""

    def explain(self, e: BaseException) -> str:
        """What an error from the store means, in one line led by its kind (full, locked, read-only...)."""

    def artifact_location(self) -> Optional[str]:
        """Where a new experiment keeps its files (None: the store's own default)."""

    def address(self, write: bool = True) -> str:
        """The address MLflow opens it by; `write=False`: one that opens it read-only where this process cannot
        write it (MLflow opens an SQLite file for writing, and fails on a read-only one)."""

    def client(self, write: bool = True) -> Any:
        """A client that reads it (MLflow's public reads: get_run, search_runs...); `write=False`: one that opens
        a store this process cannot write, read-only. Writes go through `sweep.record.writes` and `copy`."""

    def direct_writer(self, experiment: str) -> Any:
        """A writer that records runs without importing MLflow (`SqliteRunWriter`), or None: the recorder then
        opens MLflow's client."""

    def run_writer(self, client: Any, experiment: str) -> Any:
        """Once MLflow's client has opened the store and its experiment: the writer of one run per transaction,
        or None (MLflow's client calls, one per write)."""

    def for_long_sweep(self, direct: Any) -> None:
        """Settings for a long-lived launching process (SQLite: write-ahead log)."""


Builder = Callable[[str], Store]
BUILT_IN: dict[str, Builder] = {
    "sqlite": kinds.sqlite_or_database,
    "postgresql": kinds.DatabaseStore,
    "mysql": kinds.DatabaseStore,
    "mssql": kinds.DatabaseStore,
    "http": kinds.ServerStore,
    "https": kinds.ServerStore,
}
_builders = dict(BUILT_IN)


def scheme(uri: str) -> str:
    """The URI's scheme without its driver (`postgresql+psycopg` -> `postgresql`), lower case; '' for a path."""
    head, sep, _ = uri.partition(":")
    return head.split("+", 1)[0].lower() if sep else ""


def register(name: str, builder: Builder) -> None:
    """Stores at `name://...` are built by `builder(uri)` from now on (a kind added, or one replaced)."""
    _builders[name.lower()] = builder


def known(name: str) -> bool:
    """Whether a kind of store is registered for the scheme `name`."""
    return name.lower() in _builders


def open_store(uri: str) -> Store:
    """The store at `uri`, of the kind its scheme names (a scheme no kind is registered for: MLflow's own store
    through its client, as a database's; `sweep.record.address` refuses the addresses no run is kept at first)."""
    return _builders.get(scheme(uri), kinds.DatabaseStore)(uri)
