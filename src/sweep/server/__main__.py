"""`python -m sweep.server` (`sweep-server`): the group's store, one command, until a stop signal (Ctrl-C, SIGTERM...).

The admin's password comes from $SWEEP_SERVER_ADMIN_PASSWORD or --admin-password-file, never from a flag's value
(every user sees command lines). Without either, the first start makes one and keeps it in
<data_dir>/secrets/admin-password (mode 600); later starts read it there.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from hydra_plugins.sweep_launcher.api import SIGNALS, command, prog, starting

PROG = prog("sweep.server")  # its one-line messages' first word

# the imports take seconds: a signal in them is one line and 128+n, not a traceback
with starting(str(PROG)):
    from sweep.arguments import Parser
    from sweep.record.store import special_file
    from sweep.server.config import ADMIN_PASSWORD_ENV, ServerConfig, fields
    from sweep.server.keys import kept, private_file
    from sweep.server.postgres import ServerError
    from sweep.server.stack import BadSetting, check, serving


class _Stop(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def parse(argv: Optional[Sequence[str]]) -> tuple[ServerConfig, Optional[Path]]:
    ap = Parser(
        PROG, prog=command("sweep.server"), description="the group's MLflow tracking server on PostgreSQL, with logins"
    )
    for f in fields():
        default = f.default
        ap.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=type(default) if default is not None else str,
            default=default,
            help=f"{f.metadata.get('help', '')} (default: {default or 'none'})",
        )
    ap.add_argument(
        "--admin-password-file", type=Path, default=None, help=f"the admin's password (or ${ADMIN_PASSWORD_ENV})"
    )
    a = ap.parse_args(argv)
    cfg = ServerConfig(**{f.name: getattr(a, f.name) for f in fields()})
    cfg.data_dir = Path(cfg.data_dir).resolve()
    return cfg, a.admin_password_file


PASSWORD_FILE_MAX = 4096  # a password's file holds one line; MLflow's auth app takes passwords far shorter


def admin_password(cfg: ServerConfig, path: Optional[Path]) -> tuple[Optional[str], Optional[Path]]:
    """The admin's password and, when this command made it, where it is kept."""
    if path is not None:
        # the user's own file: what it cannot give is bad input, exit 2 (a file not UTF-8 was a traceback; /dev/zero
        # was read until the machine's memory ran out, a FIFO waited for a writer for ever). A pipe is read: a
        # secret given as <(pass show ...) is one; a FIFO no process writes is opened at once and reads as empty
        kind = special_file(path)
        if kind and kind != "a FIFO":
            raise BadSetting(f"--admin-password-file {path} is {kind}: expected a file holding the password")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)  # a pipe's writer still at work (a password manager asking) is waited for
            with open(fd, "rb") as f:
                raw = f.read(PASSWORD_FILE_MAX + 1)
            if kind and not raw:
                raise BadSetting(
                    f"--admin-password-file {path} is a FIFO: expected a file holding the password, or a pipe that "
                    "gives it (no process wrote to it)"
                )
            if len(raw) > PASSWORD_FILE_MAX:
                raise BadSetting(
                    f"--admin-password-file {path} holds more than {PASSWORD_FILE_MAX:,} bytes: expected a file "
                    "holding the password alone"
                )
            text = raw.decode("utf-8").strip()
        except OSError as e:
            raise BadSetting(f"--admin-password-file {path}: {e.strerror}: a file holding the password") from None
        except UnicodeDecodeError as e:
            raise BadSetting(f"--admin-password-file {path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        if not text:
            raise BadSetting(f"--admin-password-file {path}: the file is empty")
        return _valid(text, f"--admin-password-file {path}"), None
    if os.environ.get(ADMIN_PASSWORD_ENV):
        return _valid(os.environ[ADMIN_PASSWORD_ENV], f"${ADMIN_PASSWORD_ENV}"), None
    path = kept(cfg.data_dir, "admin-password")
    if path.exists():
        return path.read_text().strip(), None
    if (cfg.data_dir / "postgres").exists():
        return None, None  # the admin exists: the server needs its password no more
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    private_file(path, secrets.token_urlsafe(18))
    return path.read_text().strip(), path


def _valid(password: str, source: str) -> str:
    """`password` if MLflow's auth app takes it for the admin; else BadSetting, before anything is made (MLflow
    finds out in its workers, after the cluster is made, and says so only in its log)."""
    from mlflow.exceptions import MlflowException  # noqa: PLC0415 - mlflow: only when serving
    from mlflow.utils.validation import _validate_password  # noqa: PLC0415

    try:
        _validate_password(password)
    except MlflowException as e:
        raise BadSetting(f"{source}: the admin's password is not allowed: {e.message}") from None
    return password


def main(argv: Optional[Sequence[str]] = None) -> int:
    cfg, password_file = parse(argv)

    def stop(signum: int, _frame: object) -> None:
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)  # a second signal must not cut the stopping short
        raise _Stop(signum)

    for s in SIGNALS:
        signal.signal(s, stop)
    try:
        check(cfg)  # a bad setting: refused before anything is made
        password, made = admin_password(cfg, password_file)
        print(f"{PROG}: starting PostgreSQL and MLflow's tracking server in {cfg.data_dir} ...", flush=True)
        with serving(cfg, password, say=lambda line: print(f"{PROG}: {line}", flush=True)) as srv:
            # on every address, the one the group's machines use is this machine's name (its URI says 127.0.0.1)
            wide = (
                f", to other machines http://{socket.gethostname()}:{cfg.port}" if cfg.host in ("0.0.0.0", "::") else ""
            )
            print(
                f"{PROG}: serving {srv.uri}{wide} (runs in PostgreSQL on 127.0.0.1:{cfg.db_port}; "
                f"logs in {cfg.data_dir})"
            )
            if made is not None:
                print(
                    f"{PROG}: the admin user {cfg.admin_username!r}: its password is in {made} (readable by you only)"
                )
            print(  # a member's login is the admin's to make: the README's MLFLOW_TRACKING_USERNAME=alice is none yet
                f"{PROG}: logins: the admin {cfg.admin_username!r} makes each member's "
                "(POST /api/2.0/mlflow/users/create: docs/store.md, the shared store)"
            )
            print(
                f"{PROG}: record into it: export MLFLOW_TRACKING_USERNAME=... MLFLOW_TRACKING_PASSWORD=...; "
                f"{command('sweep', f'mlflow.tracking_uri={srv.uri}')} ...; Ctrl-C stops it",
                flush=True,
            )
            while srv.db.poll() is None and srv.server.poll() is None:
                time.sleep(0.5)
            which = "PostgreSQL" if srv.db.poll() is not None else "the tracking server"
            print(f"{PROG}: {which} ended by itself; everything is stopped (logs in {cfg.data_dir})", file=sys.stderr)
            return 1
    except ServerError as e:
        print(f"{PROG}: {e}", file=sys.stderr, flush=True)
        return 2 if isinstance(e, BadSetting) else 1
    except _Stop as e:
        print(
            f"{PROG}: stopped ({signal.Signals(e.signum).name}); PostgreSQL and the server are stopped", file=sys.stderr
        )
        return 128 + e.signum


if __name__ == "__main__":
    sys.exit(main())
