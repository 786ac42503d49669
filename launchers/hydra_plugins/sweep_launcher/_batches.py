"""Batches: jobs the app's hooks say may share one worker task, solved there together (`hydra.launcher.batch`).

The hooks key each job (`LaunchHooks.batch_key`; None: the job runs alone). Jobs with equal keys, in the order
they come, make batches of at most `batch` jobs; a batch goes to one worker as one message and comes back as
one reply per job, so every job keeps its own job dir, JobReturn and outcome. Grouping reads the jobs as an
iterable and holds at most one open batch per key, so it sits as well on a stream of jobs as on a list.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any, Callable, Hashable, Iterable, Iterator, Optional, Sequence

_batch_ids = itertools.count(1)


def group(jobs: Iterable[Any], key: Callable[[Any], Optional[Hashable]], size: int) -> Iterator[list[Any]]:
    """The jobs in batches of at most `size` jobs with equal keys; a job keyed None is a batch of its own. A batch
    is given as soon as it is full; the open ones (one per key) when the jobs run out."""
    open_: dict[Hashable, list[Any]] = {}
    for job in jobs:
        k = key(job) if size > 1 else None
        if k is None:
            yield [job]
            continue
        members = open_.setdefault(k, [])
        members.append(job)
        if len(members) >= size:
            yield open_.pop(k)
    yield from open_.values()


def batched(jobs: Iterable[Any], key: Callable[[Any], Optional[Hashable]], size: int) -> list[Any]:
    """The jobs ordered batch after batch, each member of a batch of two or more marked with its batch's id
    (`job.batch`), which `take` reads to send the batch as one."""
    out: list[Any] = []
    for members in group(jobs, key, size):
        bid = next(_batch_ids) if len(members) > 1 else None
        for job in members:
            job.batch = bid
        out += members
    return out


def take(queue: deque) -> list[Any]:
    """The next batch off the front of a queue of jobs: the first job and the jobs after it of its batch."""
    first = queue.popleft()
    out = [first]
    while first.batch is not None and queue and queue[0].batch == first.batch:
        out.append(queue.popleft())
    return out


def leading(jobs: Sequence[Any]) -> list[Any]:
    """The batch at the front of a worker's jobs: those it is running now."""
    if not jobs:
        return []
    first = jobs[0]
    return [j for j in itertools.takewhile(lambda j: first.batch is not None and j.batch == first.batch, jobs)] or [
        first
    ]


def units(jobs: Iterable[Any]) -> int:
    """How many tasks (batches, or jobs alone) a worker holds."""
    return len({("batch", j.batch) if j.batch is not None else ("job", j.idx) for j in jobs})
