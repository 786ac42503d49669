"""Batches: jobs the app's plan says may share one worker task, solved there together (`hydra.launcher.batch`).

The app's plan keys each job (`JobPlan.batch_key`; None: the job runs alone). Jobs with equal keys, in the order
they come, make batches of at most `batch` jobs; a batch goes to one worker as one message and comes back as
one reply per job, so every job keeps its own job dir, JobReturn and outcome. Grouping reads the jobs as an
iterable and holds at most one open batch per key, so it sits as well on a stream of jobs as on a list.

A batch runs on one worker, so a sweep of fewer batches than workers would leave workers idle: 16 seeds at
batch=16 on two workers ran as one batch on one core while the other waited. `spread` therefore caps a batch
at the sweep's jobs per worker (ceil(jobs / workers)) and splits each key's jobs into batches of even sizes;
it counts each key's jobs first, so `batched` reads the jobs as a list.
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from typing import Any, Callable, Hashable, Iterable, Iterator, Mapping, Optional, Sequence, Union

_batch_ids = itertools.count(1)

Key = Callable[[Any], Optional[Hashable]]


def group(jobs: Iterable[Any], key: Key, size: Union[int, Mapping[Hashable, int]]) -> Iterator[list[Any]]:
    """The jobs in batches of at most `size` jobs with equal keys (or `size[key]` for each key); a job keyed None
    is a batch of its own. A batch is given as soon as it is full; the open ones (one per key) when the jobs run
    out."""
    open_: dict[Hashable, list[Any]] = {}
    for job in jobs:
        k = key(job) if not isinstance(size, int) or size > 1 else None
        cap = size if isinstance(size, int) else size.get(k, 1)
        if k is None or cap <= 1:
            yield [job]
            continue
        members = open_.setdefault(k, [])
        members.append(job)
        if len(members) >= cap:
            yield open_.pop(k)
    yield from open_.values()


def spread(
    keys: Sequence[Optional[Hashable]], size: Union[int, Mapping[Hashable, int]], workers: int
) -> dict[Hashable, int]:
    """Each key's batch size for a sweep whose jobs have these keys: at most `size` (or `size[key]`), at most the
    sweep's jobs per worker (so that every worker has a task where the jobs allow), and as even as the key's jobs
    allow (100 jobs at most 64 a batch: 50 + 50, not 64 + 36)."""
    per_worker = -(-len(keys) // max(1, workers))
    out = {}
    for k, n in Counter(k for k in keys if k is not None).items():
        cap = max(1, min(size if isinstance(size, int) else size[k], per_worker))
        batches = -(-n // cap)
        out[k] = -(-n // batches)
    return out


def batched(jobs: Iterable[Any], key: Key, size: Union[int, Callable[[Any], int]], workers: int = 1) -> list[Any]:
    """The jobs ordered batch after batch (sizes from `spread` over `workers` workers; `size`: the most jobs a batch,
    or each job's most, its key's first job's counting), each member of a batch of two or more marked with its
    batch's id (`job.batch`), which `take` reads to send the batch as one."""
    size_of = size if callable(size) else lambda _: size
    keyed = [(key(job) if size_of(job) > 1 else None, job) for job in jobs]
    caps: dict[Hashable, int] = {}
    for k, job in keyed:
        if k is not None and k not in caps:
            caps[k] = size_of(job)
    sizes = spread([k for k, _ in keyed], caps, workers)
    out: list[Any] = []
    for pairs in group(keyed, lambda kj: kj[0], sizes):
        members = [job for _, job in pairs]
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


def backend_units(
    jobs: Sequence[Any], single: Callable[[Any], bytes], batch: Callable[[list], bytes], batches: dict[int, list]
) -> list[tuple[int, Any, bytes]]:
    """A backend's units in order, (first job's index, its GPU, payload): a job alone (`single`) or a batch
    (`batch`), answered under its first job's index (the batch kept in `batches` under it)."""
    queue, out = deque(jobs), []
    while queue:
        unit = take(queue)
        if len(unit) > 1:
            batches[unit[0].idx] = unit
        out.append((unit[0].idx, unit[0].gpu, single(unit[0]) if len(unit) == 1 else batch(unit)))
    return out
