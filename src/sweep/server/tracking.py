"""MLflow's tracking server over the cluster: runs in PostgreSQL, artifacts served by the server itself (clients
need no access to its disk), logins by MLflow's basic-auth app (served as the project's `sweep-auth` app: a click
on a study in MLflow's own list lands on its runs, as under `sweep.ui`), whose users and permissions live in the same
cluster (database `mlflow_auth`: one backup holds everything).

No secret is on a command line (which `ps` shows to every user) nor in a file the server writes: the database
password travels in PGPASSWORD, the admin's in MLFLOW_AUTH_ADMIN_PASSWORD, the form-signing key in
MLFLOW_FLASK_SERVER_SECRET_KEY, all in the server's environment only. The auth app's settings file
(basic_auth.ini) holds no secret.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from sweep.hosts import bracketed
from sweep.server.config import ServerConfig
from sweep.server.postgres import ServerError

DRIVER = "postgresql+psycopg"  # SQLAlchemy's name for psycopg 3


def database_uri(cfg: ServerConfig, dbname: str) -> str:
    return f"{DRIVER}://{cfg.db_user}@127.0.0.1:{cfg.db_port}/{dbname}"


def auth_ini(cfg: ServerConfig, path: Path) -> Path:
    """The basic-auth app's settings (no password: the admin's comes from the environment)."""
    path.write_text(
        "[mlflow]\n"
        f"default_permission = {cfg.default_permission}\n"
        f"database_uri = {database_uri(cfg, 'mlflow_auth')}\n"
        f"admin_username = {cfg.admin_username}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        f"auth_cache_ttl_seconds = {cfg.auth_cache_s}\n"
    )
    return path


def command(cfg: ServerConfig) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--host",
        bracketed(cfg.host),
        "--port",
        str(cfg.port),
        "--workers",
        str(cfg.workers),
        "--serve-artifacts",
        "--artifacts-destination",
        str((cfg.data_dir / "artifacts").resolve()),
        "--app-name",
        "sweep-auth",  # MLflow's basic-auth app, its page landing on a study's runs (sweep.report.ui_app)
        # MLflow's Flask app under gunicorn's threaded workers (an MLflow-supported server): half the CPU a
        # request costs under uvicorn, whose FastAPI layer hands each Flask request to a thread through a
        # stack of middleware. Lost: only FastAPI's own routes (OpenTelemetry trace ingestion, the AI
        # gateway, GenAI jobs, the assistant), none of which a sweep or the runs' UI uses.
        "--gunicorn-opts",
        # gunicorn's control socket (for its `gunicornc`, which nothing here uses) is one path per user,
        # $HOME/.gunicorn/gunicorn.ctl: two stores on one machine took it from each other
        f"--worker-class gthread --threads {cfg.threads} --no-control-socket",
    ]
    return cmd  # the Host headers accepted: in the environment (allowed_hosts), as MLflow reads them under gunicorn


def allowed_hosts(cfg: ServerConfig) -> str:
    """The Host headers the server answers (MLflow's DNS-rebinding guard; any other gets 403): MLflow's defaults
    (loopback and private addresses), this machine's own names and addresses, as another machine's request
    names it (http://mlflow-host:5000), and `--allowed-hosts`. MLflow's `--allowed-hosts` flag cannot be given
    with `--gunicorn-opts`; its variable MLFLOW_SERVER_ALLOWED_HOSTS can, and replaces the defaults: so all of
    them are written there."""
    from mlflow.server.security_utils import get_default_allowed_hosts  # noqa: PLC0415 - mlflow: only when serving

    names = {socket.gethostname(), socket.getfqdn(), *_addresses()}
    if cfg.host not in ("0.0.0.0", "::", ""):
        names.add(bracketed(cfg.host))
    own = [p for n in sorted(names) if n for p in (n, f"{n.replace('[', '[[]', 1)}:*")]  # fnmatch: [ is special
    given = [h.strip() for h in cfg.allowed_hosts.split(",") if h.strip()]
    return ",".join(dict.fromkeys(get_default_allowed_hosts() + own + given))


def _addresses() -> set[str]:
    """This machine's addresses, IPv6 ones as a Host header writes them ([fd00::2]) (Linux: the interfaces'
    IPv4 address by SIOCGIFADDR, IPv6 from /proc/net/if_inet6)."""
    out = set()
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue  # no IPv4 address on it
            out.add(socket.inet_ntoa(packed[20:24]))
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            out.add(f"[{ipaddress.IPv6Address(int(line.split()[0], 16)).compressed}]")
    return out


def environment(cfg: ServerConfig, db_password: str, admin_password: Optional[str], form_key: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        MLFLOW_BACKEND_STORE_URI=database_uri(cfg, "mlflow"),
        MLFLOW_AUTH_CONFIG_PATH=str(auth_ini(cfg, cfg.data_dir / "basic_auth.ini")),
        MLFLOW_AUTH_ADMIN_USERNAME=cfg.admin_username,
        PGPASSWORD=db_password,
        MLFLOW_FLASK_SERVER_SECRET_KEY=form_key,  # the same in every worker: a login form posted to one checks
        # MLflow's job runner serves GenAI jobs (scoring, trace archival): a third process the runs do not need
        MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
        MLFLOW_SERVER_ALLOWED_HOSTS=allowed_hosts(cfg),
    )
    env.pop("MLFLOW_AUTH_ADMIN_PASSWORD", None)
    if admin_password:  # needed only the first time, when the auth app makes the admin
        env["MLFLOW_AUTH_ADMIN_PASSWORD"] = admin_password
    return env


def start(cfg: ServerConfig, db_password: str, admin_password: Optional[str], form_key: str) -> subprocess.Popen:
    from sweep.report.owned_process import die_with_parent  # noqa: PLC0415 - the report package only when serving

    out = open(cfg.data_dir / "mlflow.log", "ab")
    try:
        return subprocess.Popen(
            command(cfg),
            env=environment(cfg, db_password, admin_password, form_key),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    finally:
        out.close()


def wait_ready(proc: subprocess.Popen, cfg: ServerConfig, timeout_s: float) -> None:
    """Until the server answers its health check (its first start also creates MLflow's tables: tens of seconds)."""
    deadline = time.monotonic() + timeout_s
    log = cfg.data_dir / "mlflow.log"
    while True:
        if proc.poll() is not None:
            raise ServerError(f"the tracking server ended at start (exit {proc.returncode}; its log: {log})")
        try:
            with urllib.request.urlopen(f"{cfg.uri}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise ServerError(f"the tracking server did not answer on {cfg.uri} in {timeout_s:.0f} s (its log: {log})")
        time.sleep(0.3)
