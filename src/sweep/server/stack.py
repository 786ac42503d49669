"""PostgreSQL and the tracking server, started together and stopped together (`serving`): what the command runs,
and what the tests start once per session in a temporary directory."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from sweep import hosts
from sweep.config.memory import available_bytes
from sweep.record.store import special_file
from sweep.server import keys, postgres, tracking
from sweep.server.config import PERMISSIONS, ServerConfig
from sweep.server.postgres import ServerError

ROLE = r"[A-Za-z_][A-Za-z0-9_]{0,62}"  # a role name needing no quotes (it is written into URIs and conninfo)
USERNAME = r"[^\s:%]+"  # basic auth ends the user at ':'; configparser reads '%' as an interpolation
# a tracking server worker's resident size once it serves (MLflow's app with its auth app: 271 MB measured,
# 2026-11-28, 2-core x86_64, `ps -o rss` of `sweep-server --workers 2`'s gunicorn workers), rounded up
WORKER_BYTES = 300e6
START_TIMEOUT_S = 180.0  # MLflow's first start creates its tables: a minute on a busy two-core machine


class BadSetting(ServerError):
    """A setting out of its allowed values: refused before anything starts."""


@dataclass
class Serving:
    """A running store: its tracking URI and the admin's login (password None: the admin was made before, with a
    password this command was not given)."""

    uri: str
    username: str
    password: Optional[str]
    config: ServerConfig
    db: subprocess.Popen
    server: subprocess.Popen

    def env(self) -> dict[str, str]:
        """The environment variables MLflow's client logs in with."""
        return {"MLFLOW_TRACKING_USERNAME": self.username, "MLFLOW_TRACKING_PASSWORD": self.password or ""}


def check(cfg: ServerConfig) -> None:
    if cfg.default_permission not in PERMISSIONS:
        raise BadSetting(f"default_permission={cfg.default_permission} is not allowed: one of {', '.join(PERMISSIONS)}")
    for name in ("port", "db_port"):
        if not 1 <= getattr(cfg, name) <= 65535:
            raise BadSetting(f"{name}={getattr(cfg, name)} is not allowed: a port from 1 to 65535")
    for name in ("workers", "threads"):
        if getattr(cfg, name) < 1:
            raise BadSetting(f"{name}={getattr(cfg, name)} is not allowed: at least 1")
    if not re.fullmatch(ROLE, cfg.db_user):  # 'a b' was psycopg's traceback; '' initdb's "removing contents"
        raise BadSetting(
            f"db_user={cfg.db_user!r} is not allowed: a PostgreSQL role name, a letter or '_' then up to 62 "
            f"letters, digits or '_'"
        )
    if not re.fullmatch(USERNAME, cfg.admin_username):  # '' made the cluster, then MLflow ended at start
        raise BadSetting(
            f"admin_username={cfg.admin_username!r} is not allowed: a name of visible characters but ':' and '%' "
            f"(a login's user in HTTP basic auth; MLflow's settings file)"
        )
    if (avail := available_bytes()) is not None and cfg.workers * WORKER_BYTES > avail:  # 100000 was started
        raise BadSetting(
            f"workers={cfg.workers} is not allowed: each worker holds MLflow's app (~{WORKER_BYTES / 1e6:.0f} MB), "
            f"{cfg.workers * WORKER_BYTES / 1e9:,.1f} GB in all, and {avail / 1e9:.1f} GB is available: at most "
            f"{max(1, int(avail // WORKER_BYTES))}"
        )
    if cfg.auth_cache_s < 0:
        raise BadSetting(f"auth_cache_s={cfg.auth_cache_s} is not allowed: a number of seconds >= 0")
    if cfg.port == cfg.db_port:  # PostgreSQL took it, then the tracking server ended at start (its log says why)
        raise BadSetting(f"port={cfg.port} and db_port={cfg.db_port} are one port: give the two servers two ports")
    if cfg.data_dir.exists() and not cfg.data_dir.is_dir():  # (it was NotADirectoryError's traceback at its mkdir)
        kind = special_file(cfg.data_dir) or "a file"
        raise BadSetting(f"data_dir={cfg.data_dir} is not allowed: it is {kind}: a directory (made on first use)")
    if cfg.run_as:  # a user not there was found after "starting ..." and the data directory made, exit 1
        try:
            postgres.Owner.choose(cfg.run_as)
        except ServerError:
            rule = (
                "a user of this machine other than root (PostgreSQL refuses root)"
                if os.geteuid() == 0
                else ("none (only root runs the cluster as another user)")
            )
            raise BadSetting(f"run_as={cfg.run_as} is not allowed: expected {rule}") from None
    if (why := hosts.not_own(cfg.host)) is not None:  # was "cannot listen ... choose another port"
        raise BadSetting(f"host={cfg.host} is not an address of this machine ({why}): {hosts.OWN}")


@contextlib.contextmanager
def serving(
    cfg: ServerConfig,
    admin_password: Optional[str],
    timeout_s: float = START_TIMEOUT_S,
    say: Callable[[str], None] = lambda line: None,
) -> Iterator[Serving]:
    """Start the store in `cfg.data_dir` (made on first use), yield it once it answers, stop it all on exit. `say`
    hears each step as it begins: a first start spends tens of seconds making the cluster and MLflow's tables."""
    check(cfg)
    from sweep.report.owned_process import stop_group  # noqa: PLC0415 - the report package only when serving

    pgdata = cfg.data_dir / "postgres"
    # before the ports: the same command run twice took the first's ports, and "choose another port" was its line
    if (pid := postgres.in_use(pgdata)) is not None:
        raise ServerError(
            f"data_dir={cfg.data_dir} is in use: another sweep-server's PostgreSQL (pid {pid}) runs its cluster; "
            f"stop that one, or give another --data-dir"
        )
    for host, port, flag in (("127.0.0.1", cfg.db_port, "--db-port"), (cfg.host, cfg.port, "--port")):
        if why := hosts.port_taken(host, port):  # the option named: PostgreSQL's 5433 is no port the README shows
            raise ServerError(f"cannot listen on {host}:{port} ({why}): choose another port, {flag} N")
    try:
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        (cfg.data_dir / "artifacts").mkdir(exist_ok=True)
    except OSError as e:  # (--data-dir /proc/x was FileNotFoundError's traceback)
        raise BadSetting(f"data_dir={cfg.data_dir}: cannot make it ({e.strerror}): a directory you can write") from None
    owner = postgres.Owner.choose(cfg.run_as)
    password = keys.kept_secret(cfg.data_dir, "db-password")
    first = not (pgdata / "PG_VERSION").exists()
    if first:
        say(f"making the PostgreSQL cluster in {pgdata} (first start only: initdb, some seconds)")
    postgres.init(pgdata, owner, cfg.db_user, password)
    log = cfg.data_dir / "postgres.log"  # opened here: the cluster's owner writes through the open file
    db: Optional[subprocess.Popen] = None
    server: Optional[subprocess.Popen] = None
    try:
        db = postgres.start(pgdata, owner, cfg.db_port, log)
        postgres.wait_ready(db, cfg.db_user, password, cfg.db_port, log, timeout_s)
        postgres.create_databases(cfg.db_user, password, cfg.db_port)
        say(
            "PostgreSQL is up; starting MLflow's tracking server"
            + (" (it makes its tables on a first start: tens of seconds)" if first else "")
        )
        server = tracking.start(cfg, password, admin_password, keys.kept_secret(cfg.data_dir, "form-key"))
        tracking.wait_ready(server, cfg, timeout_s)
        yield Serving(cfg.uri, cfg.admin_username, admin_password, cfg, db, server)
    finally:
        if server is not None:
            stop_group(server, grace_s=10.0)
        postgres.stop(db)
