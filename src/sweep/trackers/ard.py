"""ARD: average reuse distance with the group's MemTracker semantics (seeds 001/002, docs/traces.md).

The clock counts floats and advances by each event's size after the event. A read's distance is the clock
at the read minus the clock at that buffer's last *write* (re-reads do not shorten it); a read of a buffer
never written has distance -1 and is left out of ARD and of the read count.

Computed with numpy over the whole trace (no per-event Python; columns expanded from the trace's templates),
because tracker.scope=all_steps feeds it tens of thousands of events per run and its cost counts against the
untracked run (target <= 1.25x).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sweep.trackers.base import TrackerBase, TrackerReport
from sweep.trackers.columns import Columns
from sweep.trackers.trace import Trace


def reuse_distances(trace: Trace) -> np.ndarray:
    """Per event: the reuse distance for reads (-1 if cold), -1 for writes."""
    return Distances.of([trace]).dists


def distances(c: Columns, groups: np.ndarray | None = None) -> np.ndarray:
    """Per event: the reuse distance for reads (-1 if cold), -1 for writes; ``groups`` (default: the buffer
    codes) says which events share a last-write clock."""
    if not len(c.sizes):
        return np.zeros(0, dtype=np.int64)
    clock = np.cumsum(c.sizes) - c.sizes  # the clock at the start of each event
    # Forward-fill each buffer's last write clock: group events by buffer (stable, so in time order) and take
    # a running max of key = code*span + (write clock + 1), which is increasing within a group and below the
    # next group's keys; events before their buffer's first write keep key <= code*span, i.e. "never written".
    span = int(clock[-1] + c.sizes[-1]) + 1
    groups = c.codes if groups is None else groups
    order = np.argsort(groups, kind="stable")
    base = groups[order].astype(np.int64) * span
    key = base + np.where(c.is_write[order], clock[order] + 1, 0)
    last = np.maximum.accumulate(key) - base - 1
    last_write = np.empty_like(clock)
    last_write[order] = last
    # last_write is the clock of a write at or before the event; a read is never its own write
    return np.where(~c.is_write & (last_write >= 0), clock - last_write, -1)


@dataclass
class Distances:
    """Traces as columns (one after another; seg = the trace of each event) and every event's reuse distance
    within its own trace: computed once per tracker call and shared by the figures read from it (ARD, cache)."""

    c: Columns
    seg: np.ndarray
    dists: np.ndarray
    n: int

    @classmethod
    def of(cls, traces: list[Trace]) -> "Distances":
        c, seg = Columns.of_many(traces)
        return cls(c, seg, template_distances(c), len(traces))


def template_distances(c: Columns) -> np.ndarray:
    """distances() of every event, each within its own trace, worked out per template and per instance rather
    than over the expanded events: a read whose buffer was written earlier in its own segment has the same
    distance in every instance of the template (found over the templates' columns alone); any other read
    measures from the buffer's last write in an earlier instance of the same trace, a running maximum over an
    (instances x buffers) table of write clocks."""
    L = c.layout
    assert L is not None
    if not len(L.seq):
        return np.zeros(0, dtype=np.int64)
    nb, nt = len(c.names), int(L.t_tpl[-1]) + 1
    flat_clock = np.cumsum(L.t_sizes) - L.t_sizes
    first = np.flatnonzero(np.r_[True, L.t_tpl[1:] != L.t_tpl[:-1]])  # each template's first event
    off = flat_clock - flat_clock[first][L.t_tpl]  # clock within the template
    local = distances(Columns(L.t_write, L.t_sizes, L.t_codes, c.names), L.t_tpl * nb + L.t_codes)
    external = ~L.t_write & (local < 0)  # a read before any write of its buffer in the template
    t_size = np.add.reduceat(L.t_sizes, first)
    last_w = np.full((nt, nb), -1, dtype=np.int64)  # per template and buffer: clock of its last write, or -1
    np.maximum.at(last_w, (L.t_tpl[L.t_write], L.t_codes[L.t_write]), off[L.t_write])
    inst_size = t_size[L.seq]
    inst_start = np.cumsum(inst_size) - inst_size  # global clock at each instance
    lw = last_w[L.seq]
    written = np.where(lw >= 0, inst_start[:, None] + lw, -1)
    prev = np.vstack((np.full((1, nb), -1, dtype=np.int64), np.maximum.accumulate(written, axis=0)[:-1]))
    # a trace starts from nothing: writes of earlier traces (clocks before its first instance's) do not count
    new_trace = np.r_[True, L.owner[1:] != L.owner[:-1]]
    trace_start = np.maximum.accumulate(np.where(new_trace, inst_start, 0))
    prev = np.where(prev >= trace_start[:, None], prev, -1)
    pv = prev[L.inst, c.codes]
    clock = inst_start[L.inst] + off[L.pos]
    return np.where(external[L.pos], np.where(pv >= 0, clock - pv, -1), local[L.pos])


def ard_report(trace: Trace, d: Distances | None = None) -> TrackerReport:
    """``d``: Distances.of([trace]), if already computed."""
    d = d or Distances.of([trace])
    c, dists = d.c, d.dists
    warm = dists >= 0
    w_sizes, w_dists = c.sizes[warm].astype(np.float64), dists[warm].astype(np.float64)
    den = w_sizes.sum()
    metrics = {
        "ard": float((w_sizes * w_dists).sum() / den) if den else 0.0,
        "reads": float(warm.sum()),
        "writes": float(c.is_write.sum()),
        "total_floats": float(c.sizes.sum()),
        "dmc": float((w_sizes * np.sqrt(w_dists)).sum()),
    }
    return TrackerReport(metrics, _buffer_table(c, warm, dists))


def ard_each(traces: list[Trace], d: Distances | None = None) -> list[dict[str, float]]:
    """ard_report(t).metrics for every trace, each on its own, in one vectorised pass over all of them (the
    all_steps per-epoch curves: dozens of traces, where per-trace numpy call overhead would dominate).
    ``d``: Distances.of(traces), if already computed."""
    if not traces:
        return []
    d = d or Distances.of(traces)
    c, seg, dists, n = d.c, d.seg, d.dists, d.n
    warm = dists >= 0
    s, dw = c.sizes[warm].astype(np.float64), dists[warm].astype(np.float64)
    ws = seg[warm]
    den = np.bincount(ws, weights=s, minlength=n)
    num = np.bincount(ws, weights=s * dw, minlength=n)
    cols = {
        "ard": np.divide(num, den, out=np.zeros(n), where=den > 0),
        "reads": np.bincount(ws, minlength=n).astype(np.float64),
        "writes": np.bincount(seg[c.is_write], minlength=n).astype(np.float64),
        "total_floats": np.bincount(seg, weights=c.sizes, minlength=n),
        "dmc": np.bincount(ws, weights=s * np.sqrt(dw), minlength=n),
    }
    return [{k: float(v[i]) for k, v in cols.items()} for i in range(n)]


def _buffer_table(c: Columns, warm: np.ndarray, dists: np.ndarray) -> list[dict]:
    """Per buffer: largest size, reads (with a distance), writes, min/avg/max read distance."""
    names, codes, sizes, is_write = c.names, c.codes, c.sizes, c.is_write
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

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        return ard_each(traces)
