"""The time limit of a job on a local worker (`hydra.launcher.time_limit_s`): past it the worker is killed.

A worker's clock starts when the task at the front of its queue begins: when it is sent to an idle worker, or
when the reply of the task before it is read (a second task waits in the pipe behind a lone job). A task of R
jobs solved together (a batch) may take R times the limit. A job alone past its limit becomes FAILED with the
reason, and its worker is replaced; a batch past its limit cannot say which of its jobs was slow, so its jobs go
back to the front of the queue to run one at a time, each under the limit: only the slow one fails. The jobs
queued behind a killed task go back to the queue as they were.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import Any, Optional, Sequence

from hydra_plugins.sweep_launcher._batches import leading
from hydra_plugins.sweep_launcher._core import Reply, load_reply


def begin(w: Any, limit: Optional[float], now: Optional[float] = None) -> None:
    """The task at the front of `w`'s jobs begins now: its deadline (None: no limit, or nothing to run)."""
    if limit is None or not w.jobs:
        w.deadline = None
        return
    w.deadline = (time.perf_counter() if now is None else now) + limit * len(leading(w.jobs))


def wait_s(workers: Sequence[Any], cap: float) -> float:
    """How long the dispatcher may wait for replies before a deadline passes (at most `cap`)."""
    now = time.perf_counter()
    return max(0.0, min([cap, *(w.deadline - now for w in workers if w.deadline is not None)]))


def overdue(workers: Sequence[Any]) -> list[Any]:
    """The workers whose front task ran past its deadline, with no reply waiting to be read."""
    now = time.perf_counter()
    return [w for w in workers if w.deadline is not None and now >= w.deadline and w.jobs and not w.conn.poll()]


def stop(w: Any, limit: float, queue: deque) -> list[tuple[Any, Reply]]:
    """Kill overdue worker `w` (SIGKILL: nothing of its task may go on) and settle its jobs: the replies it sent
    before it died, the job alone FAILED with the reason, a batch's jobs and the jobs queued behind back to the
    front of `queue`. The caller replaces the worker."""
    pid = w.proc.pid
    w.proc.kill()
    w.proc.join(timeout=5)
    arrived: list[tuple[Any, Reply]] = []
    try:
        while w.jobs and w.conn.poll():  # replies sent between the deadline and the kill (then end-of-file)
            data = w.conn.recv_bytes()
            job = w.jobs.popleft()
            arrived.append((job, load_reply(data, job.idx)))
    except (EOFError, OSError):
        pass
    lead = leading(w.jobs)
    for _ in lead:
        w.jobs.popleft()
    queue.extendleft(reversed(w.jobs))
    w.jobs.clear()
    w.deadline = None
    if len(lead) > 1:
        for job in lead:
            job.batch = None
        queue.extendleft(reversed(lead))
        print(
            f"sweep: a batch of {len(lead)} jobs ran past {len(lead)} x {limit:g} s (worker process {pid} killed): "
            "its jobs run again one at a time",
            file=sys.stderr,
            flush=True,
        )
    elif lead:
        why = f"ran past the time limit of {limit:g} s (worker process {pid} killed)"
        arrived.append(
            (lead[0], Reply(idx=lead[0].idx, job_return=None, error=why + "\n", reason=why, time_limit_s=limit))
        )
    return arrived
