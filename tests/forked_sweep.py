"""`python -m sweep` (or `sweep.compare`, `sweep.store`, ...) forked from a process that has its start done,
rather than started afresh: of a refused command's ~0.6 CPU s, ~0.3 s is the interpreter's start and the imports
the module makes before its main (Hydra, OmegaConf, numpy, the config schemas), and the suite runs ~300 such commands.

A fork runs the module as `python -m MODULE ARGS` does (runpy, as `-m`: `__main__`, sys.argv, sys.path's first
entry its directory), in the command's directory, with its environment, its output into files, its exit status the
fork's (`-n` for signal n), in a session of its own if asked (test_faults.sweep: no process may outlive it). Shared
with the server are the imports made before main, which read nothing of the environment but what STARTUP names; a
command whose environment differs there starts afresh, as does every command whose start is the point (signals,
console scripts, `ps`, another user): those tests start their own. Forks also share the server's hash seed.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])

# what a Python start or an import reads of the environment: a command whose value differs from the forking
# process's starts afresh
STARTUP = ("PYTHON", "SWEEP_ROOT", "OMP_", "OPENBLAS_", "MKL_", "LD_", "MALLOC_", "NUMPY_", "LANG", "LC_")

# the forking process: reads one request a line (argv, env, cwd, files), forks, answers the fork's pid and then
# its wait status; a fork runs `python -m sweep` in its place and never returns to the loop
SERVER = r"""
import gc, json, os, runpy, sys
module = sys.argv[1]
runpy.run_module(module, run_name="__forked__")  # the imports of the module's main, which is not called
for name in json.loads(sys.argv[2]):  # libraries its commands import later (WARM)
    __import__(name)
gc.freeze()  # what the server made is never collected in a fork: a fork's collections neither scan nor copy it
requests, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 1)
for line in requests:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as e:  # no process to be had (EAGAIN, ENOMEM): said, and the next request served
        answers.write(json.dumps({"error": repr(e)}) + "\n"); answers.flush()
        continue
    if pid == 0:
        answers.close()
        if req["session"]:
            os.setsid()
        os.dup2(null, 0)
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        os.close(null)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        import tempfile, time  # what a start reads of the environment once: $TMPDIR's directory, TZ
        tempfile.tempdir = None
        time.tzset()
        sys.argv = [sys.argv[0], *req["argv"]]
        del requests, answers, line, req, pid
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        sys.exit(0)
    answers.write(json.dumps({"pid": pid}) + "\n"); answers.flush()
    _, status = os.waitpid(pid, 0)
    answers.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n"); answers.flush()
"""

# libraries that commands import after their start, imported once in the forking server: of a single run's
# ~0.35 CPU s, ~0.09 s is numpy's and rich's later imports; a command on MLflow's client (migrate, compare, a
# server's sweep, Hydra's own launchers) spends ~1.3 s importing MLflow. Only libraries that read nothing of the
# environment when imported, and none of the project's modules: Hydra's plugin scan executes those afresh.
WARM = (
    "numpy",
    "numpy.random",
    "rich.console",
    "rich.table",
    "rich.progress",
    "mlflow",
    "mlflow.tracking",
    "mlflow.entities",
    "mlflow.store.tracking.sqlalchemy_store",
)

_lock = threading.Lock()


class _Server:
    """A forking server of `module` and what it answered that is not read yet."""

    def __init__(self, module: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, module, json.dumps(WARM)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=ROOT,  # not a test's directory, which goes before the server does
        )
        self.pending = b""

    def ask(self, request: dict) -> None:
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self, timeout: float) -> dict | None:
        """The server's next answer; None if none came within `timeout` seconds (no thread: none may be had)."""
        deadline, fd = time.monotonic() + timeout, self.proc.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if poller.poll(left * 1000):
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise EOFError(f"the forking server ended (exit {self.proc.wait()})")
                self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


_servers: dict[str, _Server] = {}


def _startup(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(STARTUP)}


def with_project(env: dict[str, str]) -> dict[str, str]:
    """`env` with the project's root first on PYTHONPATH: a job can name a test's class (conftest.FAULTY)."""
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)}


# the session's environment as a command gets it, before any test changed it: the servers start with it, and fork
# only commands whose start would read the same
PRISTINE = _startup(with_project(dict(os.environ)))


def forkable(env: dict[str, str]) -> bool:
    """Whether a command with environment `env` may be forked from a server rather than started."""
    return os.environ.get("SWEEP_TEST_FORK", "1") != "0" and _startup(env) == PRISTINE


def run(
    argv: list[str],
    cwd: Path | None,
    env: dict[str, str],
    timeout: float,
    module: str = "sweep",
    session: bool = False,
) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGV` forked (in a session of its own if `session`: the result's `pid` is its id), answered
    as subprocess.run(..., capture_output=True, text=True, timeout) answers; on timeout the command (its session)
    is killed. Where no fork could be made, the command is started as a process of its own."""
    args = [sys.executable, "-m", module, *argv]
    with _lock, tempfile.TemporaryDirectory(prefix="forked-sweep-") as d:
        out, err = Path(d) / "out", Path(d) / "err"
        request = {"argv": argv, "env": env, "cwd": str(cwd or Path.cwd()), "out": str(out), "err": str(err)}
        pid = None
        try:
            server = _servers.get(module)
            if server is None or server.proc.poll() is not None:
                server = _servers[module] = _Server(module, env)
            server.ask({**request, "session": session})
            started = server.answer(120)
            pid = (started or {}).get("pid")
            if pid is None:
                raise RuntimeError(f"no fork: {started}")
            ended = server.answer(timeout)
            if ended is None:
                (os.killpg if session else os.kill)(pid, signal.SIGKILL)
                if server.answer(60) is None:
                    raise RuntimeError(f"command {pid} not reaped after SIGKILL")
                raise subprocess.TimeoutExpired(args, timeout)
        except subprocess.TimeoutExpired:
            raise
        except Exception:
            # a server in a state this side does not know: gone, and the next command gets a new one
            _servers.pop(module).close()
            if pid is not None:
                raise
            return _started(args, cwd, env, timeout, session)
        done = subprocess.CompletedProcess(args, ended["status"], out.read_text(), err.read_text())
        done.pid = pid  # type: ignore[attr-defined]
        return done


def _started(
    args: list[str], cwd: Path | None, env: dict[str, str], timeout: float, session: bool
) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=session
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        (os.killpg if session else os.kill)(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    done = subprocess.CompletedProcess(args, proc.returncode, out, err)
    done.pid = proc.pid  # type: ignore[attr-defined]
    return done


def command(
    module: str, argv: list[str], cwd: Path | None, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGV`, forked where `env` allows, else started: as subprocess.run(..., capture_output=True,
    text=True, timeout) answers."""
    if forkable(env):
        return run(argv, cwd, env, timeout, module=module)
    return subprocess.run(
        [sys.executable, "-m", module, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def python_m(
    module: str, *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` as a user runs it from `cwd` (this process's directory if None), with this process's
    environment updated with `env` (the project first on PYTHONPATH): forked where it can be."""
    return command(module, list(args), cwd, with_project({**os.environ, **(env or {})}), timeout)
