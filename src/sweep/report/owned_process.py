"""Run a server command as this process's own: whatever stops this process stops everything the command started.

`mlflow ui` starts a server that starts its own workers and job runners. Run as a plain child, a SIGTERM to
the parent (`kill`, a container stop, a CI timeout) ends only the parent and leaves the server serving. Here
the command runs in its own process group (session), and:
- a stop signal (Ctrl-C, SIGTERM, SIGHUP, Ctrl-\\: the launcher's SIGNALS) of this process stops the whole group:
  SIGTERM, then SIGKILL after a grace period; this process then exits 128+n (130, 143, 129, 131) with one line;
- if this process is killed outright (SIGKILL), the kernel sends the command's leader SIGTERM
  (PR_SET_PDEATHSIG, Linux), and it stops its own children as on any SIGTERM.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from typing import Any, Callable, Sequence

from hydra_plugins.sweep_launcher.api import SIGNALS

GRACE_S = 10.0
PR_SET_PDEATHSIG = 1


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the signal handlers below still cover kill and Ctrl-C
        pass


def stop_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """SIGTERM the command's process group, SIGKILL what is left after `grace_s`."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        try:  # the leader is gone; its group may still hold children it did not stop
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break


def run_owned(
    cmd: Sequence[str],
    name: str,
    started: Callable[[subprocess.Popen], int | None] | None = None,
    stopping: Callable[[], None] | None = None,
    **popen: Any,
) -> int:
    """Run `cmd` (Popen keywords `popen`) until it ends or this process is told to stop; returns the exit code to
    use. `started(proc)`, called once it runs, may end it early by returning an exit code; `stopping()` is
    called when a signal stops it, before the command is stopped (to silence what it says as it stops)."""

    def stop(signum: int, _frame: object) -> None:
        raise _Stopped(signum)

    previous = {s: signal.signal(s, stop) for s in SIGNALS}
    proc = subprocess.Popen(list(cmd), start_new_session=True, preexec_fn=die_with_parent, **popen)
    try:
        code = started(proc) if started is not None else None
        if code is None:
            code = proc.wait()
    except _Stopped as e:
        for s in previous:
            signal.signal(s, signal.SIG_IGN)  # a second signal must not cut the stopping short
        if stopping is not None:
            stopping()
        stop_group(proc)
        print(
            f"{name}: stopped ({signal.Signals(e.signum).name}); the server and its workers are stopped",
            file=sys.stderr,
            flush=True,
        )
        return 128 + e.signum
    finally:
        stop_group(proc, grace_s=2.0)  # the server ended by itself: nothing of its group outlives it
        for s, h in previous.items():
            signal.signal(s, h)
    return code
