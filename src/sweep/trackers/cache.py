"""Cache: an LRU cache of whole buffers, capacity `tracker.cache_size_floats` (docs/traces.md, "Cache").

Seed 003 left open whether tiling W1 pays off in a real cache even though ARD cannot show it; this simulates
the cache the group's CacheTracker did. A read of a resident buffer is a hit; a miss inserts the buffer
(evicting least recently used ones) unless it is larger than the cache, which then never becomes resident.
A write makes its buffer resident (an existing entry takes the new size without an eviction check).

The cache's contents are a small hashable state, so the simulation runs once per distinct (contents, step
template) pair (sweep.trace.replay), its figures are worked out once per such result and summed by how often
it occurs; only the missed reads whose distance depends on the step (sweep.trackers.ard.Reads) are per step.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property, lru_cache, partial
from itertools import chain

import numpy as np

from sweep.trace.columns import Columns
from sweep.trace.replay import PerResult, Replay
from sweep.trace.trace import READ, Event, Trace
from sweep.trackers.ard import Reads, ard_each, ard_report, distances
from sweep.trackers.base import TrackerBase, TrackerReport


class LRUCache:
    """Resident buffers, least recently used first, and the floats they occupy."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: OrderedDict[str, int] = OrderedDict()
        self.used = 0

    def insert(self, name: str, size: int) -> None:
        """A new entry, evicting until it fits; a buffer larger than the cache is not inserted."""
        if size > self.capacity:
            return
        while self.used + size > self.capacity:
            _, old = self.entries.popitem(last=False)
            self.used -= old
        self.entries[name] = size
        self.used += size

    def read(self, name: str, size: int) -> bool:
        """True on a hit; a miss brings the buffer in."""
        if name in self.entries:
            self.entries.move_to_end(name)
            return True
        self.insert(name, size)
        return False

    def write(self, name: str, size: int) -> None:
        if name in self.entries:
            self.used += size - self.entries[name]
            self.entries[name] = size
            self.entries.move_to_end(name)
        else:
            self.insert(name, size)


HIT, MISS = 1, 2  # per event of a replayed segment; writes are 0


def _simulate(capacity: int, state: tuple[tuple[str, int], ...], events: tuple[Event, ...]):
    """One segment from the cache holding ``state`` (least recently used first): the next state, and per event
    HIT, MISS or 0 (a write)."""
    cache = LRUCache(capacity)
    cache.entries.update(state)
    cache.used = sum(size for _, size in state)
    kinds = np.zeros(len(events), dtype=np.int8)
    for pos, (op, name, size) in enumerate(events):
        if op != READ:
            cache.write(name, size)
        else:
            kinds[pos] = HIT if cache.read(name, size) else MISS
    return tuple(cache.entries.items()), kinds


@lru_cache(maxsize=1024)
def _local(events: tuple[Event, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, distance within the segment or -1) of a segment's events: the same for every cache state."""
    sizes = np.array([e[2] for e in events], dtype=np.int64)
    codes = np.unique([e[1] for e in events], return_inverse=True)[1]
    return sizes, distances(Columns(np.array([e[0] != READ for e in events], dtype=bool), sizes, codes, []))


def _figures(kinds: np.ndarray, events: tuple[Event, ...]) -> np.ndarray:
    """[hits, misses, floats missed, sum of size x distance and of size over misses of reads of a buffer written
    earlier in the same segment] of one segment's result (the other misses' distances depend on the instance)."""
    sizes, local = _local(events)
    miss = kinds == MISS
    warm = miss & (local >= 0)
    return np.array(
        [(kinds == HIT).sum(), miss.sum(), sizes[miss].sum(), (sizes[warm] * local[warm]).sum(), sizes[warm].sum()],
        dtype=np.float64,
    )


def cache_pass(capacity: int) -> PerResult:
    """The cache's replay with per-segment figures: share one across the traces of a run."""
    return PerResult(Replay(partial(_simulate, capacity)), _figures, 5)


def cache_each(
    traces: list[Trace],
    capacity: int,
    p: PerResult | None = None,
    r: Reads | None = None,
    rid_lists: list[list[int]] | None = None,
) -> list[dict[str, float]]:
    """cache_report(t, capacity).metrics for every trace, each from an empty cache, summed per distinct
    (cache state, segment) result; the misses of reads whose buffer was written in an earlier segment add
    their distances (effective ARD) per instance, never over the expanded trace. ``r``: Reads.of(traces) and
    ``rid_lists``: the traces' results in ``p``, if already made."""
    if not traces:
        return []
    p = p or cache_pass(capacity)
    rid_lists = rid_lists or p.replay.result_ids(traces, (), carry=False)
    sums = p.sums(rid_lists)
    n = len(traces)
    r = r or Reads.of(traces)
    L = r.layout  # its instances are the traces' segments in the same order as rid_lists
    num, den = sums[:, 3].copy(), sums[:, 4].copy()
    if len(L.seq):
        ev, inst, dist = r.external
        rids = np.fromiter(chain.from_iterable(rid_lists), dtype=np.int64, count=len(L.seq))
        results = p.replay.results
        offs = np.cumsum([0] + [len(k) for k in results])
        t_start = np.cumsum(L.t_len) - L.t_len
        missed = np.concatenate(results)[offs[rids[inst]] + ev - t_start[L.t_tpl[ev]]] == MISS
        seg, size = L.owner[inst[missed]], L.t_sizes[ev[missed]]
        num += np.bincount(seg, weights=size * dist[missed], minlength=n)
        den += np.bincount(seg, weights=size, minlength=n)
    out = []
    for i in range(n):
        h, m = int(sums[i, 0]), int(sums[i, 1])
        out.append(
            {
                "cache_hit_rate": h / (h + m) if h + m else 0.0,
                "cache_hits": float(h),
                "cache_misses": float(m),
                "effective_ard": float(num[i] / den[i]) if den[i] else 0.0,
                "cache_miss_floats": float(sums[i, 2]),
            }
        )
    return out


def _buffer_counts(p: PerResult, r: int) -> dict[str, list[int]]:
    """Per buffer read in one segment result: [hits, misses] (kept in p.memo)."""
    got = p.memo.get(r)
    if got is None:
        got = {}
        for kind, (_, name, _) in zip(p.replay.results[r].tolist(), p.replay.templates[p.replay.result_template[r]]):
            if kind:
                got.setdefault(name, [0, 0])[kind == MISS] += 1
        p.memo[r] = got
    return got


def cache_report(trace: Trace, capacity: int, p: PerResult | None = None, r: Reads | None = None) -> TrackerReport:
    """The cache figures and, per buffer read (in order of its first read), its hits and misses. ``r``:
    Reads.of([trace]), if already made."""
    p = p or cache_pass(capacity)
    rids = p.replay.run(trace, ())[1]
    metrics = cache_each([trace], capacity, p, r, [rids])[0]
    tpls, seq = trace.segments()
    per = {e[1]: [0, 0] for t in dict.fromkeys(seq) for e in tpls[t] if e[0] == READ}  # in order of first read
    occ = np.bincount(np.asarray(rids, dtype=np.int64), minlength=len(p.replay.results))
    for r in np.flatnonzero(occ).tolist():  # a few distinct results
        for name, (h, m) in _buffer_counts(p, r).items():
            per[name][0] += int(occ[r]) * h
            per[name][1] += int(occ[r]) * m
    return TrackerReport(metrics, [{"buffer": b, "cache_hits": h, "cache_misses": m} for b, (h, m) in per.items()])


@dataclass
class CacheTracker(TrackerBase):
    """tracker=cache: the ARD figures plus the LRU cache's hits, misses and effective ARD."""

    name: str = "cache"

    @cached_property
    def _pass(self) -> PerResult:  # one memo for the whole trace and its epochs
        return cache_pass(self.cache_size_floats)

    def summarize(self, trace: Trace) -> TrackerReport:
        r = Reads.of([trace])  # for ARD and the cache's effective ARD
        return ard_report(trace, r).merge(cache_report(trace, self.cache_size_floats, self._pass, r))

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        r = Reads.of(traces)
        return [
            {**a, **m} for a, m in zip(ard_each(traces, r), cache_each(traces, self.cache_size_floats, self._pass, r))
        ]
