"""Cache: an LRU cache of whole buffers, capacity `tracker.cache_size_floats` (specs/traces.md "Cache tracker").

Seed 003 left open whether tiling W1 pays off in a real cache even though ARD cannot show it; this simulates
the cache the group's CacheTracker did. A read of a resident buffer is a hit; a miss inserts the buffer
(evicting least recently used ones) unless it is larger than the cache, which then never becomes resident.
A write makes its buffer resident (an existing entry takes the new size without an eviction check).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from sweep.trackers.ard import ard_each, ard_report, reuse_distances
from sweep.trackers.base import TrackerBase, TrackerReport
from sweep.trackers.trace import READ, Trace


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


def cache_report(trace: Trace, capacity: int) -> TrackerReport:
    cache = LRUCache(capacity)
    hits = misses = miss_floats = 0
    num = den = 0
    per: dict[str, dict] = {}
    for (op, name, size), d in zip(trace, reuse_distances(trace).tolist()):
        if op != READ:
            cache.write(name, size)
            continue
        row = per.setdefault(name, {"buffer": name, "cache_hits": 0, "cache_misses": 0})
        if cache.read(name, size):
            hits += 1
            row["cache_hits"] += 1
            continue
        misses += 1
        row["cache_misses"] += 1
        miss_floats += size
        if d >= 0:  # cold reads have no distance (as in ARD)
            num += size * d
            den += size
    metrics = {
        "cache_hit_rate": hits / (hits + misses) if hits + misses else 0.0,
        "cache_hits": float(hits),
        "cache_misses": float(misses),
        "effective_ard": num / den if den else 0.0,
        "cache_miss_floats": float(miss_floats),
    }
    return TrackerReport(metrics, list(per.values()))


@dataclass
class CacheTracker(TrackerBase):
    """tracker=cache: the ARD figures plus the LRU cache's hits, misses and effective ARD."""

    name: str = "cache"

    def summarize(self, trace: Trace) -> TrackerReport:
        return ard_report(trace).merge(cache_report(trace, self.cache_size_floats))

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        return [{**a, **cache_report(t, self.cache_size_floats).metrics} for a, t in zip(ard_each(traces), traces)]
