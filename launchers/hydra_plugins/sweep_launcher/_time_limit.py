"""The time limit of a job on a local worker (`Job.time_limit_s`: hydra.launcher.time_limit_s, else the app's plan
of the job): past it the worker is killed.

A worker's clock starts when the task at the front of its queue begins: when it is sent to an idle worker, or
when the reply of the task before it is read (a second task waits in the pipe behind a lone job). Unless the app
says more, a task of R jobs solved together (a batch) may take R times the limit, and past it, since nothing says
which of its jobs was slow, its jobs go back to the front of the queue to run one at a time, each under the
limit. An app that says what the limit covers (`timer.begin(i)`, `timer.end()`) gives each job of a batch its own
deadline: the job past it is the one that FAILED, and the rest of its batch goes back to the queue as a batch. A
job alone past its limit is FAILED with the reason. The jobs queued behind a killed task go back as they were;
the caller replaces the worker.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import Any, Callable, Optional, Sequence

from hydra_plugins.sweep_launcher._batches import leading
from hydra_plugins.sweep_launcher._core import Reply, load_reply
from hydra_plugins.sweep_launcher.timer import END, MARK


def begin(w: Any) -> None:
    """The task at the front of `w`'s jobs begins now: its deadline (None: no limit, or nothing to run)."""
    lead = leading(w.jobs)
    limit: Optional[float] = lead[0].time_limit_s if lead else None
    w.timed = None
    w.deadline = time.perf_counter() + limit * len(lead) if limit is not None else None


def taken(w: Any, job: Any) -> None:
    """`job`'s reply was read off `w`: where it was the last of its task, the next task begins."""
    if job.batch is None or not w.jobs or w.jobs[0].batch != job.batch:
        begin(w)


def clock(w: Any, message: bytes) -> None:
    """The app's word from inside the task (timer.py): job i's timed work begins now, or it is over."""
    said = message[len(MARK) :]
    lead = leading(w.jobs)
    i = int(said) if said != END else None
    limit = lead[i].time_limit_s if i is not None and i < len(lead) else None
    if limit is None:
        w.deadline = w.timed = None
    else:
        w.deadline, w.timed = time.perf_counter() + limit, i


def wait_s(workers: Sequence[Any], cap: float) -> float:
    """How long the dispatcher may wait for replies before a deadline passes (at most `cap`)."""
    now = time.perf_counter()
    return max(0.0, min([cap, *(w.deadline - now for w in workers if w.deadline is not None)]))


def overdue(workers: Sequence[Any]) -> list[Any]:
    """The workers whose front task ran past its deadline, with nothing waiting to be read."""
    now = time.perf_counter()
    return [w for w in workers if w.deadline is not None and now >= w.deadline and w.jobs and not w.conn.poll()]


def stop(w: Any, queue: deque) -> list[tuple[Any, Reply]]:
    """Kill overdue worker `w` (SIGKILL: nothing of its task may go on) and settle its jobs (see the module's
    docstring); returns the replies to hand over."""
    pid = w.proc.pid
    w.proc.kill()
    w.proc.join(timeout=5)
    arrived: list[tuple[Any, Reply]] = []
    try:
        while w.jobs and w.conn.poll():  # replies sent between the deadline and the kill (then end-of-file)
            data = w.conn.recv_bytes()
            if not data.startswith(MARK):
                job = w.jobs.popleft()
                arrived.append((job, load_reply(data, job.idx)))
    except (EOFError, OSError):
        pass
    lead = leading(w.jobs)
    limit = lead[0].time_limit_s if lead else 0.0
    return arrived + settle(
        w,
        queue,
        lambda late: (
            f"ran past the time limit of {late.time_limit_s:g} s (worker process {pid} killed)",
            late.time_limit_s,
        ),
        f"a batch of {len(lead)} jobs ran past {len(lead)} x {limit:g} s (worker process {pid} killed)",
    )


def settle(
    w: Any, queue: deque, why: Callable[[Any], tuple[str, Optional[float]]], batch_why: str
) -> list[tuple[Any, Reply]]:
    """`w`'s front task ended with its replies missing (killed past its deadline, or the worker died with it). The
    job that was running is FAILED (`why(job)`: the reason, the limit it ran under) where it is known: a job alone,
    or the one the app said it was in, the rest of its batch going back as a batch. A batch that said nothing goes
    back one job at a time: blaming its first job failed a job that finishes alone (a batch=8 with a job whose
    worker dies: another job FAILED, its metrics lost). The jobs queued behind it go back as they were."""
    lead = leading(w.jobs)
    timed = w.timed
    for _ in lead:
        w.jobs.popleft()
    queue.extendleft(reversed(w.jobs))
    w.jobs.clear()
    w.deadline = w.timed = None
    late = lead[timed] if timed is not None and timed < len(lead) else lead[0] if len(lead) == 1 else None
    if late is None:  # a batch that said nothing: which job was at fault is not known
        for job in lead:
            job.batch = None
        queue.extendleft(reversed(lead))
        print(f"sweep: {batch_why}: its jobs run again one at a time", file=sys.stderr, flush=True)
        return []
    queue.extendleft(reversed([j for j in lead if j is not late]))  # the rest of its batch, as a batch
    reason, limit = why(late)
    return [(late, Reply(idx=late.idx, job_return=None, error=reason + "\n", reason=reason, time_limit_s=limit))]
