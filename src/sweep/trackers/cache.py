"""Cache: an LRU cache of whole buffers, capacity `tracker.cache_size_floats` (docs/traces.md, "Cache").

Seed 003 left open whether tiling W1 pays off in a real cache even though ARD cannot show it; this simulates
the cache the group's CacheTracker did. A read of a resident buffer is a hit; a miss inserts the buffer
(evicting least recently used ones) unless it is larger than the cache, which then never becomes resident.
A write makes its buffer resident (an existing entry takes the new size without an eviction check).

The cache's contents are a small hashable state, so the simulation runs once per distinct (contents, step
template) pair (sweep.trackers.replay) and the figures are summed with numpy over the expanded trace.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import partial

import numpy as np

from sweep.trackers.ard import Distances, ard_each, ard_report
from sweep.trackers.base import TrackerBase, TrackerReport
from sweep.trackers.replay import Replay
from sweep.trackers.trace import READ, Event, Trace


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


def _kinds(traces: list[Trace], capacity: int) -> np.ndarray:
    """HIT/MISS/0 per event of the traces one after another, each trace from an empty cache; memoised per
    (cache state, segment) over all of them (sweep.trackers.replay)."""
    replay: Replay = Replay(partial(_simulate, capacity))
    parts = [replay.results[r] for t in traces for r in replay.run(t, ())[1]]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int8)


def _cache_metrics(d: Distances, kinds: np.ndarray) -> list[dict]:
    """The cache figures of each of the d.n traces."""
    c, seg, dists, n = d.c, d.seg, d.dists, d.n
    hit, miss = kinds == HIT, kinds == MISS
    hits = np.bincount(seg[hit], minlength=n)
    misses = np.bincount(seg[miss], minlength=n)
    miss_floats = np.bincount(seg[miss], weights=c.sizes[miss], minlength=n)
    warm = miss & (dists >= 0)  # cold reads have no distance (as in ARD)
    # integer-valued float64 sums are exact (below 2**53), so these equal summing event by event in Python
    num = np.bincount(seg[warm], weights=c.sizes[warm] * dists[warm], minlength=n)
    den = np.bincount(seg[warm], weights=c.sizes[warm], minlength=n)
    out = []
    for i in range(n):
        h, m = int(hits[i]), int(misses[i])
        out.append({
            "cache_hit_rate": h / (h + m) if h + m else 0.0,
            "cache_hits": float(h),
            "cache_misses": float(m),
            "effective_ard": int(num[i]) / int(den[i]) if den[i] else 0.0,
            "cache_miss_floats": float(int(miss_floats[i])),
        })
    return out


def cache_report(trace: Trace, capacity: int, d: Distances | None = None) -> TrackerReport:
    """``d``: Distances.of([trace]), if already computed."""
    d = d or Distances.of([trace])
    c = d.c
    kinds = _kinds([trace], capacity)
    # per buffer read, in order of its first read
    uniq, first = np.unique(c.codes[kinds != 0], return_index=True)
    hits = np.bincount(c.codes[kinds == HIT], minlength=len(c.names))
    misses = np.bincount(c.codes[kinds == MISS], minlength=len(c.names))
    table = [{"buffer": c.names[b], "cache_hits": int(hits[b]), "cache_misses": int(misses[b])}
             for b in uniq[np.argsort(first)].tolist()]
    return TrackerReport(_cache_metrics(d, kinds)[0], table)


def cache_each(traces: list[Trace], capacity: int, d: Distances | None = None) -> list[dict[str, float]]:
    """cache_report(t, capacity).metrics for every trace, each on its own, in one batched pass."""
    if not traces:
        return []
    return _cache_metrics(d or Distances.of(traces), _kinds(traces, capacity))


@dataclass
class CacheTracker(TrackerBase):
    """tracker=cache: the ARD figures plus the LRU cache's hits, misses and effective ARD."""

    name: str = "cache"

    def summarize(self, trace: Trace) -> TrackerReport:
        d = Distances.of([trace])
        return ard_report(trace, d).merge(cache_report(trace, self.cache_size_floats, d))

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        d = Distances.of(traces)
        return [{**a, **m} for a, m in zip(ard_each(traces, d), cache_each(traces, self.cache_size_floats, d))]
