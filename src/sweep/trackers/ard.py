"""ARD: average reuse distance with the group's MemTracker semantics (seeds 001/002, specs/traces.md).

The clock counts floats and advances by each event's size after the event. A read's distance is the clock
at the read minus the clock at that buffer's last *write* (re-reads do not shorten it); a read of a buffer
never written has distance -1 and is left out of ARD and of the read count.

Computed with numpy over the whole trace (no per-event Python), because tracker.scope=all_steps feeds it
tens of thousands of events per run and its cost counts against the untracked run (target <= 15%).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sweep.trackers.base import TrackerBase, TrackerReport
from sweep.trackers.trace import READ, Trace


def buffer_codes(trace: Trace) -> tuple[np.ndarray, list[str]]:
    """Each event's buffer as an integer code, and the buffer names in order of first appearance."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(n, len(index)) for n in trace.names), dtype=np.int64,
                        count=len(trace.names))
    return codes, list(index)


def reuse_distances(trace: Trace) -> np.ndarray:
    """Per event: the reuse distance for reads (-1 if cold), -1 for writes."""
    codes, _ = buffer_codes(trace)
    return _distances(trace, codes)


def _distances(trace: Trace, codes: np.ndarray) -> np.ndarray:
    sizes = np.asarray(trace.sizes, dtype=np.int64)
    is_write = np.asarray(trace.ops, dtype=np.int64) != READ
    clock = np.cumsum(sizes) - sizes  # the clock at the start of each event
    # Forward-fill each buffer's last write clock: group events by buffer (stable, so in time order) and take
    # a running max of key = code*span + (write clock + 1), which is increasing within a group and below the
    # next group's keys; events before their buffer's first write keep key <= code*span, i.e. "never written".
    span = int(sizes.sum()) + 1
    order = np.argsort(codes, kind="stable")
    base = codes[order] * span
    key = base + np.where(is_write[order], clock[order] + 1, 0)
    last = np.maximum.accumulate(key) - base - 1 if len(key) else key
    last_write = np.empty_like(clock)
    last_write[order] = last
    # last_write is the clock of a write at or before the event; a read is never its own write
    return np.where(~is_write & (last_write >= 0), clock - last_write, -1)


def ard_report(trace: Trace) -> TrackerReport:
    codes, names = buffer_codes(trace)
    dists = _distances(trace, codes)
    sizes = np.asarray(trace.sizes, dtype=np.int64)
    is_write = np.asarray(trace.ops, dtype=np.int64) != READ
    warm = dists >= 0
    w_sizes, w_dists = sizes[warm].astype(np.float64), dists[warm].astype(np.float64)
    den = w_sizes.sum()
    metrics = {
        "ard": float((w_sizes * w_dists).sum() / den) if den else 0.0,
        "reads": float(warm.sum()),
        "writes": float(is_write.sum()),
        "total_floats": float(sizes.sum()),
        "dmc": float((w_sizes * np.sqrt(w_dists)).sum()),
    }
    return TrackerReport(metrics, _buffer_table(names, codes, sizes, is_write, warm, dists))


def _buffer_table(names: list[str], codes: np.ndarray, sizes: np.ndarray, is_write: np.ndarray,
                  warm: np.ndarray, dists: np.ndarray) -> list[dict]:
    """Per buffer: largest size, reads (with a distance), writes, min/avg/max read distance."""
    nb = len(names)
    size = np.zeros(nb, dtype=np.int64)
    np.maximum.at(size, codes, sizes)
    writes = np.bincount(codes[is_write], minlength=nb)
    wc, wd = codes[warm], dists[warm]
    reads = np.bincount(wc, minlength=nb)
    dsum = np.bincount(wc, weights=wd, minlength=nb)
    dmin = np.full(nb, np.iinfo(np.int64).max)
    dmax = np.full(nb, -1)
    np.minimum.at(dmin, wc, wd)
    np.maximum.at(dmax, wc, wd)
    table = []
    for b, name in enumerate(names):
        r = int(reads[b])
        table.append({"buffer": name, "size": int(size[b]), "reads": r, "writes": int(writes[b]),
                      "min_dist": int(dmin[b]) if r else None, "avg_dist": float(dsum[b] / r) if r else None,
                      "max_dist": int(dmax[b]) if r else None})
    return table


@dataclass
class ARDTracker(TrackerBase):
    """tracker=ard."""

    name: str = "ard"

    def summarize(self, trace: Trace) -> TrackerReport:
        return ard_report(trace)
