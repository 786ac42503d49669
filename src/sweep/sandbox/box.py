"""Sandbox: a user's function in a process of its own (sweep.sandbox's docstring says how it is used)."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import sweep.sandbox.counters as counters
import sweep.sandbox.isolation as isolation
import sweep.sandbox.wire as wire
from sweep.errors import ConfigError
from sweep.sandbox.target import Target, find

PR_SET_CHILD_SUBREAPER = 36
DIR_PREFIX = "sweep-sandbox-"  # + the parent's pid: a folder whose parent was killed is removed by the next one


@dataclass(frozen=True)
class Limits:
    """What the child may use. Wall-clock limits are the parent's (load_s here, each call's `timeout`); the others
    are the kernel's, set in the child before any of the entrant's code runs."""

    load_s: float = 30.0  # importing the entrant's module (its top-level code) and checking its function
    memory_mb: int = 4096  # address space (RLIMIT_AS): past it an allocation fails (MemoryError)
    cpu_s: Optional[float] = None  # CPU seconds over the process's life (RLIMIT_CPU); None: none
    file_mb: int = 64  # the largest file it may write (RLIMIT_FSIZE), its log of stdout and stderr included
    # all it may write (its temporary folder and working directory: under bwrap one tmpfs of this size; a file per
    # file_mb alone let an entrant put 1,280 MiB in its temporary folder, host memory past memory_mb, and as much on
    # the host's disk)
    disk_mb: int = 256


class EntrantFailed(RuntimeError):
    """The entrant's process failed a call: it raised, exited, crashed, ran out of memory or time, or answered
    something that is not an answer. The message is one line, the reason."""


class TimeLimit(EntrantFailed):
    """A call ran past its wall-clock limit: the sandbox was killed."""


class Sandbox:
    """A user's function `path` (`<file.py>:<function>` or `<module>:<function>`) loaded in a sandboxed process.
    `field` names the setting in errors; `signature`: the positional arguments it must take (None: unchecked);
    `harnesses`: the project's functions (`module:function`) that `call` may run around it, imported in the child
    before the entrant's module."""

    def __init__(
        self,
        path: str,
        field: str = "method.path",
        signature: Optional[Sequence[str]] = None,
        limits: Limits = Limits(),
        harnesses: Sequence[str] = (),
    ) -> None:
        self.target: Target = find(path, field)
        self.field, self.signature, self.limits, self.harnesses = field, signature, limits, tuple(harnesses)
        self.how = isolation.mode()
        self.source = ""  # the entrant's module's text, once loaded
        self.wall_s = 0.0  # the last call's seconds on the parent's clock
        self.used = counters.Counters()  # the last call's counters (sweep.sandbox.counters)
        self._proc: Optional[subprocess.Popen] = None
        self._dir: Optional[Path] = None
        self._known: set[int] = set()

    # -- life --
    def __enter__(self) -> "Sandbox":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def open(self) -> "Sandbox":
        """Start the process and load the function in it, within `limits.load_s` (ConfigError naming the field:
        the module raised, exited or hung as it loaded, or has no such function, or not that signature)."""
        _remove_orphaned_dirs()
        self._dir = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-"))
        work = self._dir / "work"
        work.mkdir()
        seen = [p for p in (self.target.file, self.target.origin) if p is not None]
        lim = self.limits
        child_limits = {
            "memory_bytes": lim.memory_mb << 20,
            "cpu_s": lim.cpu_s and max(1, int(lim.cpu_s + 0.999)),
            "file_bytes": lim.file_mb << 20,
            "parent": os.getpid() if self.how == "process" else None,
        }
        if self.how == "process":
            _become_subreaper()
            self._known = set(counters.children(os.getpid()))
        log = open(self._dir / "stderr", "wb")  # noqa: SIM115 - the child's to write, closed here once it has it
        try:
            self._proc = subprocess.Popen(
                isolation.command(self.how, work, seen, child_limits, lim.disk_mb << 20),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=work,
                env={**isolation.ENV, "TMPDIR": str(work)},
                start_new_session=True, close_fds=True,
            )  # fmt: skip
        finally:
            log.close()
        t = self.target
        request = {
            "op": "load", "path": t.path, "where": t.where, "function": t.function, "field": self.field,
            "file": str(t.file) if t.file else None, "module": t.module,
            "sys_path": [str(t.root)] if t.root else [],
            "signature": None if self.signature is None else list(self.signature),
            "harnesses": list(self.harnesses),
        }  # fmt: skip
        what = f"loading {t.file.name}" if t.file else f"importing {t.module}"
        try:
            reply = self._ask(request, lim.load_s)
        except TimeLimit:
            self.close()
            raise ConfigError(f"{self.field}={t.path}: {what} took more than {lim.load_s:g} s (stopped)") from None
        except EntrantFailed as e:
            self.close()
            raise ConfigError(f"{self.field}={t.path}: {what}: {e}") from None
        if not reply.get("ok"):
            self.close()
            raise ConfigError(str(reply.get("config") or reply.get("raised") or "failed"))
        self.source = str((reply.get("value") or {}).get("source", ""))
        return self

    def close(self) -> counters.Counters:
        """Kill the process and everything it started; its whole life's counters."""
        total = counters.Counters()
        p, self._proc = self._proc, None
        if p is not None:
            total = counters.read(p.pid)
            killed: set[int] = set()
            for _ in range(3):  # what it started meanwhile too
                for pid in reversed(counters.tree(p.pid)):
                    _kill(pid)
                    killed.add(pid)
            if self.how == "process":
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
            for stream in (p.stdin, p.stdout):
                if stream is not None:
                    stream.close()
            p.wait()
            if self.how == "process":
                self._reap_orphans()
            _gone(killed - {p.pid})
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        return total

    def _reap_orphans(self) -> None:
        """The fallback: processes the entrant started that left its group and whose parent died were given to
        this process (a subreaper): every new child of ours is the entrant's, killed and waited for."""
        for _ in range(3):
            stray = [c for c in counters.children(os.getpid()) if c not in self._known]
            for pid in stray:
                _kill(pid)
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
            if not stray:
                return

    # -- calls --
    def call(self, *args: Any, timeout: float, harness: Optional[str] = None, keep: bool = False, **kwargs: Any) -> Any:
        """The function on `args` (JSON data, numpy arrays; a Handle), or `harness` (one of `harnesses`) around
        it, within `timeout` seconds of the parent's clock: its value (JSON data, arrays), or with `keep` a Handle
        of the object it returned, kept in the child (EntrantFailed, TimeLimit)."""
        if harness is not None and harness not in self.harnesses:
            raise ValueError(f"harness {harness!r} was not imported before the entrant: {self.harnesses}")
        request = {"op": "call", "args": list(args), "kwargs": kwargs, "harness": harness, "keep": keep}
        return self._value(self._ask(request, timeout))

    def method(self, handle: wire.Handle, name: str, *args: Any, timeout: float, **kwargs: Any) -> Any:
        """`name(*args)` of the object kept as `handle`, one round trip, within `timeout` seconds: its value."""
        request = {"op": "method", "handle": handle, "name": name, "args": list(args), "kwargs": kwargs}
        return self._value(self._ask(request, timeout))

    def _value(self, reply: Any) -> Any:
        if not isinstance(reply, dict) or "ok" not in reply:
            raise EntrantFailed(f"its process answered something that is not an answer: {str(reply)[:200]}")
        if reply["ok"] is True:
            return reply.get("value")
        if "raised" in reply:
            raise EntrantFailed(f"raised {str(reply['raised'])[:500]}")
        raise EntrantFailed(f"returned what cannot be sent back: {str(reply.get('garbage'))[:500]}")

    def _ask(self, request: dict[str, Any], timeout: float) -> Any:
        p = self._proc
        if p is None or p.stdin is None or p.stdout is None:
            raise EntrantFailed("its process is not running")
        before = counters.read(p.pid)
        t0 = time.perf_counter()
        try:
            wire.send(p.stdin.fileno(), request)
            reply = wire.receive(p.stdout.fileno(), time.monotonic() + timeout)
        except wire.TimedOut:
            self.wall_s = time.perf_counter() - t0
            self.used = counters.read(p.pid) - before
            self.close()
            raise TimeLimit(f"ran past the time limit of {timeout:g} s (its process killed)") from None
        except (wire.Closed, BrokenPipeError):
            self.wall_s = time.perf_counter() - t0
            raise EntrantFailed(self._ended()) from None
        except wire.WireError as e:
            self.close()
            raise EntrantFailed(f"its process sent something that is not a message: {e}") from None
        self.wall_s = time.perf_counter() - t0
        self.used = counters.read(p.pid) - before
        return reply

    def _ended(self) -> str:
        """Why the process ended mid-request (it is waited for, then everything it started killed)."""
        p = self._proc
        assert p is not None
        try:
            code = p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        log = self._log_tail()
        self.close()
        if code is None:
            why = "closed its pipe"
        elif code < 0 or (self.how == "bwrap" and code > 128):
            sig = -code if code < 0 else code - 128
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            why = {
                "SIGXCPU": f"used up its CPU time limit ({self.limits.cpu_s} s)",
                "SIGKILL": "was killed (SIGKILL)",
            }.get(name, f"crashed ({name})")
        else:
            why = f"exited with code {code}"
        return f"its process {why}" + (f"; its last line: {log}" if log else "")

    def _log_tail(self) -> str:
        try:
            with open(self._dir / "stderr", "rb") as f:  # type: ignore[operator]
                f.seek(max(0, os.fstat(f.fileno()).st_size - 4000))
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
        except (OSError, TypeError):
            return ""
        return lines[-1][:300] if lines else ""


def _remove_orphaned_dirs() -> None:
    """The folders of sandboxes whose parent was killed (a worker past the launcher's time limit) before it could
    remove them."""
    for d in Path(tempfile.gettempdir()).glob(f"{DIR_PREFIX}*-*"):
        pid = d.name[len(DIR_PREFIX) :].partition("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)


def _gone(pids: set[int], within_s: float = 5.0) -> None:
    """Wait (a while) until the processes killed have ended: SIGKILL is delivered, not yet acted on, when kill
    returns, and no process may outlive the sandbox's close."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rpartition(")")[2].split()[0]
            except (OSError, IndexError):
                continue
            if state not in ("Z", "X"):
                alive.append(pid)
        if not alive:
            return
        time.sleep(0.005)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


_subreaper: list[bool] = []


def _become_subreaper() -> None:
    """The fallback: processes the entrant orphans come to this process instead of init (Linux' prctl)."""
    if not _subreaper:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass
        _subreaper.append(True)
