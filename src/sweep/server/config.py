"""The server's settings, each default written once here; `python -m sweep.server --help` lists them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from sweep.hosts import bracketed
from sweep.paths import STORE_DIR

# the admin's password: from this environment variable, or from a file (--admin-password-file); never a flag
ADMIN_PASSWORD_ENV = "SWEEP_SERVER_ADMIN_PASSWORD"


@dataclass
class ServerConfig:
    """Where the store lives and where it listens. The database always listens on 127.0.0.1 only: the tracking
    server is its one client."""

    data_dir: Path = field(default=STORE_DIR / "server", metadata={"help": "the cluster, artifacts, secrets, logs"})
    host: str = field(default="127.0.0.1", metadata={"help": "the tracking server's address (0.0.0.0: every one)"})
    port: int = field(default=5000, metadata={"help": "the tracking server's port"})
    db_port: int = field(default=5433, metadata={"help": "PostgreSQL's port on 127.0.0.1"})
    workers: int = field(default=4, metadata={"help": "the tracking server's worker processes (MLflow's default)"})
    threads: int = field(default=4, metadata={"help": "requests each worker process serves at once"})
    admin_username: str = field(default="admin", metadata={"help": "MLflow's admin user, made on the first start"})
    # MLflow's default: every user reads every experiment; one edits or deletes only what it created or was given
    default_permission: str = field(default="READ", metadata={"help": "READ | EDIT | MANAGE | NO_PERMISSIONS"})
    allowed_hosts: str = field(
        default="",
        metadata={
            "help": "Host headers accepted besides loopback, private addresses and this machine's own names, "
            "comma-separated host:port (* any; MLflow's --allowed-hosts)"
        },
    )
    # MLflow's login cache: a login's password (scrypt, ~66 ms a check) is checked once per this many seconds per
    # worker. A changed password or a deleted user is forgotten at once only by the worker that made the change,
    # so the others accept the old login for up to this long: seconds, not minutes (docs/store.md)
    auth_cache_s: int = field(default=10, metadata={"help": "seconds a checked login is remembered per worker"})
    db_user: str = field(default="sweep", metadata={"help": "the database role the tracking server uses"})
    # when run as root: the system user that runs PostgreSQL (initdb and postgres refuse to run as root)
    run_as: str = field(
        default="",
        metadata={
            "help": "when root: the user that runs PostgreSQL (none: postgres where that user exists, else nobody)"
        },
    )

    @property
    def uri(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else ("::1" if self.host == "::" else self.host)
        return f"http://{bracketed(host)}:{self.port}"


PERMISSIONS = ("READ", "EDIT", "MANAGE", "NO_PERMISSIONS")


def fields() -> list[dataclasses.Field]:
    return list(dataclasses.fields(ServerConfig))
