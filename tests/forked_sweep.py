"""`python -m sweep` (or `sweep.compare`, `sweep.store`, ...) forked from a process that has its start done,
rather than started afresh: of a refused command's ~0.6 CPU s, ~0.3 s is the interpreter's start and the imports
the module makes before its main (Hydra, OmegaConf, numpy, the config schemas), and the suite runs ~300 such commands.
One server has the imports of every module in MODULES made, and forks whichever a command names.

A fork runs the module as `python -m MODULE ARGS` does (runpy, as `-m`: `__main__`, sys.argv, sys.path's first
entry its directory), in the command's directory, with its environment, its output into files, its exit status the
fork's (`-n` for signal n), in a session of its own if asked (test_faults.sweep: no process may outlive it). Shared
with the server are the imports made before main, which read nothing of the environment but what STARTUP names; a
command whose environment differs there starts afresh, as does every command whose start is the point (signals,
console scripts, `ps`, another user): those tests start their own. Forks also share the server's hash seed.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
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

# the forking process: reads one request a line (argv, env, cwd, files), forks, answers the fork's pid at once and
# its wait status when it ends (several forks may run side by side: a SIGCHLD wakes the loop); a fork runs
# `python -m sweep` in its place and never returns to the loop
SERVER = r"""
import gc, json, os, runpy, select, signal, sys
for module in json.loads(sys.argv[1]):  # the imports of each module's main, which is not called
    runpy.run_module(module, run_name="__forked__")
for name in json.loads(sys.argv[2]):  # libraries its commands import later (WARM)
    __import__(name)
gc.freeze()  # what the server made is never collected in a fork: a fork's collections neither scan nor copy it
answers = os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 1)
wake_r, wake_w = os.pipe()
os.set_blocking(wake_r, False)
os.set_blocking(wake_w, False)
signal.signal(signal.SIGCHLD, lambda *_: None)
signal.set_wakeup_fd(wake_w)  # a fork's end wakes the select below
def say(answer):
    os.write(answers, (json.dumps(answer) + "\n").encode())  # one write of a short line: whole
pending = b""
while True:
    ready = select.select([0, wake_r], [], [])[0]
    if wake_r in ready:
        try:
            os.read(wake_r, 4096)
        except BlockingIOError:
            pass
    while True:  # every fork that ended
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        say({"pid": pid, "status": os.waitstatus_to_exitcode(status)})
    if 0 not in ready:
        continue
    chunk = os.read(0, 65536)
    if not chunk:
        break
    pending += chunk
    while b"\n" in pending:
        line, _, pending = pending.partition(b"\n")
        req = json.loads(line)
        sys.stdout.flush(); sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as e:  # no process to be had (EAGAIN, ENOMEM): said, and the next request served
            say({"error": repr(e)})
            continue
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (answers, wake_r, wake_w):
                os.close(fd)
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
            import importlib, tempfile, time  # what a start reads of the environment once: $TMPDIR's directory, TZ
            importlib.reload(sys.modules["sweep"])  # the package sets its commands' environment (MLflow's telemetry)
            tempfile.tempdir = None
            time.tzset()
            sys.argv = [sys.argv[0], *req["argv"]]
            module = req["module"]
            del pending, chunk, ready, line, req, pid
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            sys.exit(0)
        say({"pid": pid})
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

# the modules the suite runs as commands, each one's imports made once in the one forking server (a server of
# each: ~3 CPU s a start, five of them in each xdist worker); a fork may run any module
MODULES = ("sweep", "sweep.compare", "sweep.store", "sweep.spool", "sweep.ui")

_lock = threading.Lock()  # one reader of a server's answers at a time


class _Server:
    """The forking server, what it answered that is not read yet, and the statuses of forks that ended whose
    waiter has not asked yet."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, json.dumps(MODULES), json.dumps(WARM)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=ROOT,  # not a test's directory, which goes before the server does
        )
        self.pending = b""
        self.ended: dict[int, int] = {}

    def answer(self, timeout: float) -> dict | None:
        """The server's next answer; None if none came within `timeout` seconds (no thread: none may be had)."""
        deadline, fd = time.monotonic() + timeout, self.proc.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while b"\n" not in self.pending:
            if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                if time.monotonic() >= deadline:
                    return None
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError(f"the forking server ended (exit {self.proc.wait()})")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)

    def fork(self, request: dict) -> int:
        """The pid of a fork running `request` (under _lock)."""
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            answer = self.answer(120)
            if answer is None or "pid" not in answer:
                raise RuntimeError(f"no fork: {answer}")
            if "status" not in answer:
                return answer["pid"]
            self.ended[answer["pid"]] = answer["status"]

    def status(self, pid: int, timeout: float) -> int | None:
        """Fork `pid`'s exit status once it ended, None if it runs on after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            with _lock:
                if pid in self.ended:
                    return self.ended.pop(pid)
                answer = self.answer(min(0.2, max(0.0, deadline - time.monotonic())))  # others may wait too
                if answer is not None:
                    if "status" not in answer:
                        raise RuntimeError(f"an answer no request asked for: {answer}")
                    self.ended[answer["pid"]] = answer["status"]
                    continue
            if time.monotonic() >= deadline:
                return None

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


_server: _Server | None = None  # the running forking server, once a command asked for one


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


class Forked:
    """A forked command, answered as a `subprocess.Popen` with text pipes answers `pid`, `returncode`, `poll`,
    `wait`, `communicate`, `send_signal` and `kill` (its output is in files, read once it ended)."""

    def __init__(self, server: _Server, pid: int, args: list[str], files: Path) -> None:
        self.server, self.pid, self.args, self.files = server, pid, args, files
        self.returncode: int | None = None
        self.read = 0  # the bytes of its output readline has handed out

    def readline(self, timeout: float = 60) -> str:
        """Its next line of output once written, as `proc.stdout.readline()` answers ('' once it ended without
        one, or after `timeout` seconds): the output file is read on from where the last line ended."""
        deadline = time.monotonic() + timeout
        while True:
            ended = self.poll() is not None
            try:
                text = (self.files / "out").read_bytes()[self.read :]  # made by the fork as it starts
            except FileNotFoundError:
                text = b""
            if b"\n" in text or ended:
                line = text[: text.index(b"\n") + 1] if b"\n" in text else text
                self.read += len(line)
                return line.decode()
            if time.monotonic() >= deadline:
                return ""
            time.sleep(0.01)

    def poll(self) -> int | None:
        return self.returncode if self.returncode is not None else self._ended(0.0)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and self._ended(1e9 if timeout is None else timeout) is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode  # type: ignore[return-value]

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        try:
            return (self.files / "out").read_bytes()[self.read :].decode(), (self.files / "err").read_text()
        finally:
            shutil.rmtree(self.files, ignore_errors=True)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _ended(self, timeout: float) -> int | None:
        global _server
        try:
            self.returncode = self.server.status(self.pid, timeout)
        except Exception:
            # a server in a state this side does not know: gone, and the next command gets a new one
            with _lock:
                if _server is self.server:
                    _server = None
                    self.server.close()
            raise
        return self.returncode


class _NoFork(Exception):
    pass


def _fork(argv: list[str], cwd: Path | None, env: dict[str, str], module: str, session: bool) -> Forked:
    """`python -m MODULE ARGV` forked from the server (started if none runs); _NoFork where none could be made."""
    files = Path(tempfile.mkdtemp(prefix="forked-sweep-"))
    request = {"module": module, "argv": argv, "env": env, "cwd": str(cwd or Path.cwd()), "session": session}
    global _server
    with _lock:
        try:
            if _server is None or _server.proc.poll() is not None:
                _server = _Server(env)
            server = _server
            pid = server.fork({**request, "out": str(files / "out"), "err": str(files / "err")})
        except Exception:
            if _server is not None:
                _server.close()
                _server = None
            shutil.rmtree(files, ignore_errors=True)
            raise _NoFork from None
    return Forked(server, pid, [sys.executable, "-m", module, *argv], files)


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
    try:
        proc = _fork(argv, cwd, env, module, session)
    except _NoFork:
        return _started(args, cwd, env, timeout, session)
    try:
        out, err = proc.communicate(timeout)
    except subprocess.TimeoutExpired:
        (os.killpg if session else os.kill)(proc.pid, signal.SIGKILL)
        try:
            proc.communicate(60)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"command {proc.pid} not reaped after SIGKILL") from None
        raise subprocess.TimeoutExpired(args, timeout) from None
    done = subprocess.CompletedProcess(args, proc.returncode, out, err)
    done.pid = proc.pid  # type: ignore[attr-defined]
    return done


def popen(
    argv: list[str], cwd: Path | None, env: dict[str, str], module: str = "sweep", session: bool = False
) -> "Forked | subprocess.Popen":
    """`python -m MODULE ARGV` started to run beside others (two sweeps at once): forked where `env` allows, else
    started; answered as subprocess.Popen(..., stdout=PIPE, stderr=PIPE, text=True) answers for `communicate`,
    `wait`, `poll`, `returncode`, `pid` and signals (in a session of its own if `session`)."""
    if forkable(env):
        with contextlib.suppress(_NoFork):
            return _fork(argv, cwd, env, module, session)
    return subprocess.Popen(
        [sys.executable, "-m", module, *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=session,
    )


def readline(proc: "Forked | subprocess.Popen", timeout: float = 60) -> str:
    """A command's next line of output once written, forked (its output a file) or started (a pipe)."""
    return proc.stdout.readline() if isinstance(proc, subprocess.Popen) else proc.readline(timeout)


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
