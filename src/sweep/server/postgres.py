"""A PostgreSQL cluster of the store's own, in its data directory, listening on 127.0.0.1 only.

initdb and postgres refuse to run as root (PostgreSQL's rule: a server compromised must not own the machine):
run as root, the cluster runs as another user (`run_as`, else `postgres` where that user exists, else `nobody`)
through util-linux's setpriv; the tracking server stays this process's child as before. The role the tracking
server logs in with has a generated password kept beside the data (mode 600), handed over in PGPASSWORD.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from sweep.server.keys import private_file

# Debian's postgresql puts its programs in /usr/lib/postgresql/<major>/bin, off the PATH
DEBIAN_BINS = "/usr/lib/postgresql/*/bin"
DATABASES = ("mlflow", "mlflow_auth")  # the runs; MLflow's users and permissions


class ServerError(Exception):
    """The store cannot be started: one line naming what and why."""


def program(name: str) -> str:
    """The path of PostgreSQL program `name`: on the PATH, else Debian's newest."""
    found = shutil.which(name)
    if found:
        return found
    for bindir in sorted(glob.glob(DEBIAN_BINS), key=lambda p: int(Path(p).parent.name), reverse=True):
        if os.access(Path(bindir) / name, os.X_OK):
            return str(Path(bindir) / name)
    raise ServerError(
        f"PostgreSQL's {name} is not installed (on Debian or Ubuntu: apt-get install postgresql; "
        f"it is looked for on the PATH and in {DEBIAN_BINS})"
    )


@dataclass
class Owner:
    """Who runs the cluster: this process's user, or (as root) another one."""

    uid: int
    gid: int
    name: str

    @classmethod
    def choose(cls, run_as: str) -> "Owner":
        if os.geteuid() != 0:
            if run_as and run_as != pwd.getpwuid(os.geteuid()).pw_name:
                raise ServerError(f"run_as={run_as}: only root can run the cluster as another user")
            return cls(os.geteuid(), os.getegid(), pwd.getpwuid(os.geteuid()).pw_name)
        names = [run_as] if run_as else ["postgres", "nobody"]
        for name in names:
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                continue
            if entry.pw_uid != 0:
                return cls(entry.pw_uid, entry.pw_gid, name)
        raise ServerError(f"run as root: no user {' or '.join(names)} to run PostgreSQL as (set run_as)")

    def prefix(self) -> list[str]:
        """The command prefix that runs a program as this owner (empty: as this process)."""
        if self.uid == os.geteuid():
            return []
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--pdeathsig=TERM"]

    def give(self, path: Path) -> None:
        if self.uid != os.geteuid():
            os.chown(path, self.uid, self.gid)


def _reachable(owner: Owner, directory: Path) -> None:
    """The owner must be able to enter the cluster's parent directory (a home or a pytest temp dir is 700)."""
    if not owner.prefix():
        return
    done = subprocess.run([*owner.prefix(), "test", "-x", str(directory)], capture_output=True)
    if done.returncode != 0:
        raise ServerError(
            f"user {owner.name}, who runs PostgreSQL, cannot enter {directory}: choose a data directory it can "
            f"reach (--data-dir; every parent directory searchable, chmod o+x) or another user (--run-as)"
        )


def init(pgdata: Path, owner: Owner, role: str, password: str) -> bool:
    """Make the cluster if `pgdata` holds none yet (returns whether it did). Made aside and renamed into place:
    a command stopped half-way leaves no half-made cluster behind."""
    if (pgdata / "PG_VERSION").exists():
        return False
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _reachable(owner, pgdata.parent)
    aside = pgdata.parent / f".{pgdata.name}.new"
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir(mode=0o700)
    owner.give(aside)
    pwfile = pgdata.parent / f".{pgdata.name}.pw"
    private_file(pwfile, password + "\n")
    owner.give(pwfile)
    try:
        done = subprocess.run(
            [
                *owner.prefix(),
                program("initdb"),
                "-D",
                str(aside),
                "-U",
                role,
                f"--pwfile={pwfile}",
                "--auth-host=scram-sha-256",
                "--auth-local=scram-sha-256",
                "--encoding=UTF8",
                "--no-instructions",
            ],
            capture_output=True,
            text=True,
        )
    finally:
        pwfile.unlink(missing_ok=True)
    if done.returncode != 0:
        shutil.rmtree(aside, ignore_errors=True)
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise ServerError(f"initdb failed: {lines[-1] if lines else done.returncode}")
    aside.rename(pgdata)
    return True


def in_use(pgdata: Path) -> Optional[int]:
    """The pid of a PostgreSQL that holds the cluster (its postmaster.pid names it and it is alive), else None: a
    second `sweep-server` on one data directory was told only PostgreSQL's log line ("Is another postmaster ...")."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):  # no file, or its process is gone (PostgreSQL starts over a stale one)
        return None
    return pid if comm == "postgres" else None  # a pid reused since by another program: stale too


def start(pgdata: Path, owner: Owner, port: int, log: Path) -> subprocess.Popen:
    """Run postgres on 127.0.0.1:`port` (no Unix socket: only the tracking server connects, over TCP)."""
    from sweep.report.owned_process import die_with_parent  # noqa: PLC0415 - the report package only when serving

    out = open(log, "ab")
    try:
        return subprocess.Popen(
            [
                *owner.prefix(),
                program("postgres"),
                "-D",
                str(pgdata),
                "-p",
                str(port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
    finally:
        out.close()


def conninfo(role: str, password: str, port: int, dbname: str = "postgres") -> str:
    return f"host=127.0.0.1 port={port} user={role} password={password} dbname={dbname} connect_timeout=5"


def wait_ready(proc: subprocess.Popen, role: str, password: str, port: int, log: Path, timeout_s: float) -> None:
    """Until the cluster takes a login (or it ended: its log's last line says why)."""
    import psycopg  # noqa: PLC0415 - the driver only when serving

    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise ServerError(f"PostgreSQL ended at start ({_last_line(log)}; its log: {log})")
        try:
            psycopg.connect(conninfo(role, password, port), autocommit=True).close()
            return
        except psycopg.OperationalError as e:
            if "password authentication failed" in str(e):  # no wait makes a login the cluster refuses work
                raise ServerError(
                    f"PostgreSQL in {log.parent} refused the login of role {role!r}: the cluster was made with "
                    f"another db_user (give the one of its first start)"
                ) from None
            if time.monotonic() > deadline:
                raise ServerError(f"PostgreSQL took no login on 127.0.0.1:{port} in {timeout_s:.0f} s ({e})") from e
            time.sleep(0.2)


def create_databases(role: str, password: str, port: int) -> None:
    """The runs' database and MLflow's users' database, made once."""
    import psycopg  # noqa: PLC0415 - the driver only when serving

    with psycopg.connect(conninfo(role, password, port), autocommit=True) as conn:
        have = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
        for name in DATABASES:
            if name not in have:
                conn.execute(f'CREATE DATABASE "{name}"')


def stop(proc: Optional[subprocess.Popen], timeout_s: float = 30.0) -> None:
    """PostgreSQL's fast shutdown (SIGINT: sessions ended, data checkpointed), SIGKILL if it hangs."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(2)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1] if lines else "nothing logged"
