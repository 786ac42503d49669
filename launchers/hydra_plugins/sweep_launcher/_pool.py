"""Warm local worker processes, one job each at a time over a pipe, that never outlive the launcher.

A worker dies with the launching process whatever kills it (SIGKILL included): it asks the kernel for SIGKILL
when its parent dies (Linux `prctl(PR_SET_PDEATHSIG)`), and elsewhere it sees end-of-file on its pipe, which it
can because it closes every pipe end it inherited from the launcher (its own parent end, and the other
workers' ends a fork copies); it then ends at once, quietly, whatever it runs (`_worker._orphaned`).
"""

from __future__ import annotations

import ctypes
import errno
import multiprocessing as mp
import os
import resource
import signal
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from hydra_plugins.sweep_launcher._pickling import dumps
from hydra_plugins.sweep_launcher._signals import SIGNALS, leave_to_launcher

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies (Linux); a parent that is already gone: exit now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: end-of-file on the pipe stops an idle worker
        pass
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def _worker_entry(conn: Any, preload: Sequence[str], parent_pid: int, inherited: Sequence[Any]) -> None:
    # the launching process owns Ctrl-C and SIGTERM: it stops the workers and records what was unfinished; it
    # forked this one with them blocked, so none lands before the worker's handlers are set
    leave_to_launcher()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    die_with_parent(parent_pid)
    for c in inherited:  # the launcher's pipe ends a fork copied into this process (the objects themselves:
        c.close()  # closing them marks them closed, so nothing closes the fd numbers again later)
    from hydra_plugins.sweep_launcher._worker import worker_main  # noqa: PLC0415 - in the forked worker only

    worker_main(conn, preload)


@dataclass
class Worker:
    proc: Any
    conn: Any
    sessions: set[int] = field(default_factory=set)
    templates: set[int] = field(default_factory=set)  # template hydra sections this worker already has
    jobs: deque = field(default_factory=deque)  # sent to this worker, oldest (running) first
    gone: bool = False  # a send found its pipe closed: it takes no more jobs, and is replaced once drained
    deadline: Optional[float] = None  # when its front task must end (perf_counter; _time_limit.py); None: no limit
    timed: Optional[int] = None  # the job of its front task the deadline is for (its place), where the app said


class WorkersNotStarted(Exception):
    """The system refused a worker process or its pipe (`ulimit -n`, `ulimit -u`, memory): the sweep's one line."""


def shell_limit(e: Exception) -> Optional[str]:
    """The line for a limit of this shell's that stopped the sweep before any job (multiprocessing's or an
    import's traceback of 54-58 lines under `ulimit -n 12` or 13); None for any other error."""
    if isinstance(e, WorkersNotStarted):
        return str(e)
    if isinstance(e, OSError) and e.errno in (errno.EMFILE, errno.ENFILE):
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return f"{e.strerror} before any job started (`ulimit -n` is {soft}): raise it, or run fewer workers"
    return None


def cpu_seconds(pid: int) -> Optional[float]:
    """The CPU seconds of a worker that has ended and is not reaped yet (its /proc entry stays until then: read it
    before asking its exit code, which reaps it); None where the system does not say."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def cpu_limit_ended(used: Optional[float], exitcode: Optional[int]) -> str:
    """Where this shell's CPU-time limit ended a dead worker that had used `used` CPU seconds (`ulimit -t`: the
    kernel's SIGXCPU at the soft limit, SIGKILL at the hard one, counted over all the jobs the worker ran): that
    said, for its job's line ("worker process N died (exit code -9)" said nothing of why); else ""."""
    soft = resource.getrlimit(resource.RLIMIT_CPU)[0]
    if soft == resource.RLIM_INFINITY or used is None or exitcode not in (-signal.SIGKILL, -signal.SIGXCPU):
        return ""
    if used < soft - 0.5:  # (clock ticks: a limit of 3 s is met at 2.9x)
        return ""
    return (
        f": this shell's CPU time limit ended it (`ulimit -t` is {soft} s; the worker had used {used:.1f} CPU s over "
        "its jobs): raise it"
    )


class Pool:
    """Worker processes started once per sweep. A worker that dies takes only its own job down: the
    dispatcher replaces it and the job becomes FAILED."""

    def __init__(self, n: int, preload: Sequence[str] = ()) -> None:
        self.preload = list(preload)
        self.workers: list[Worker] = []
        self.grow(n)

    @staticmethod
    def _context() -> Any:
        # fork starts a worker in milliseconds with Hydra already imported, but only a single-threaded process
        # forks safely; once Modal's client or rich's refresh thread runs (a worker replaced mid-sweep), spawn.
        if "fork" in mp.get_all_start_methods() and threading.active_count() == 1:
            return mp.get_context("fork")
        return mp.get_context("spawn")

    def grow(self, n: int) -> None:
        while len(self.workers) < n:
            try:
                self.workers.append(self._start())
            except OSError as e:  # EMFILE, EAGAIN, ENOMEM: a 54-line traceback of multiprocessing's, exit 1
                raise WorkersNotStarted(
                    f"worker {len(self.workers) + 1} of {n} could not be started: {e.strerror or e} (the limits of "
                    "this shell: `ulimit -n` open files, `ulimit -u` processes); raise them, or run fewer workers "
                    "(hydra.launcher.n_workers=1)"
                ) from None

    def _start(self) -> Worker:
        ctx = self._context()
        parent, child = ctx.Pipe(duplex=True)
        # fork passes these objects as they are; spawn would pickle (duplicate) them, and inherits none anyway
        inherited = [parent, *(w.conn for w in self.workers)] if ctx.get_start_method() == "fork" else []
        proc = ctx.Process(
            target=_worker_entry, args=(child, self.preload, os.getpid(), inherited), daemon=True, name="sweep-worker"
        )
        # a stop signal waits (the kernel holds it) until the fork is done: its handler would otherwise run inside
        # fork's callbacks (logging's lock release), where Python only prints its exception
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        child.close()
        return Worker(proc, parent)

    def replace(self, w: Worker) -> None:
        w.conn.close()
        w.proc.join(timeout=1)
        self.workers[self.workers.index(w)] = self._start()

    def close(self, kill: bool = False) -> None:
        for w in self.workers:
            if kill:
                w.proc.kill()  # a job cut short: SIGKILL, nothing of it may go on
            else:
                try:
                    w.conn.send_bytes(dumps(("stop", 0)))
                except OSError:
                    pass
        for w in self.workers:
            w.proc.join(timeout=2)
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join(timeout=2)
            w.conn.close()
        self.workers = []
