"""What a job's time limit covers (`hydra.launcher.time_limit_s`), said by the app from inside its task.

By default the limit covers a whole task on a local worker (a batch of R jobs: R times the limit). An app that
knows better says, in the worker, when the work the limit is for begins and ends: `begin(i)` as the i-th job of
the task (its place in the batch; 0 for a job alone) begins it, which gives that job the whole limit from now on,
and `end()` when it is over, after which the task is not cut short (the app's own evaluation of what the job did).
A job past its limit is then the one that ran past it, and the rest of its batch runs again without it.

Outside a local worker of this launcher (Hydra's basic launcher, submitit, a Modal container) both do nothing.
"""

from __future__ import annotations

from typing import Callable, Optional

MARK = b"\x00clock:"  # a pickled reply starts with b"\x80": a clock message never looks like one
END = b"end"

# set by a local worker: its pipe to the launcher. Hydra's plugin scan runs this module's code again in the module
# it has (a worker scans when it runs its first job): what the worker set stays
_send: Optional[Callable[[bytes], None]] = globals().get("_send")


def begin(i: int = 0) -> None:
    """The i-th job of this task begins the work its time limit is for: its deadline is now plus the limit."""
    if _send is not None:
        _send(MARK + str(int(i)).encode())


def end() -> None:
    """The work the time limit is for is over: what the task does from now on is not cut short."""
    if _send is not None:
        _send(MARK + END)
