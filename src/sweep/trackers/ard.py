"""ARD: average reuse distance with the group's MemTracker semantics (seeds 001/002, docs/traces.md).

The clock counts floats and advances by each event's size after the event. A read's distance is the clock
at the read minus the clock at that buffer's last *write* (re-reads do not shorten it); a read of a buffer
never written has distance -1 and is left out of ARD and of the read count.

Computed with numpy from the trace's templates without expanding them to events (Reads: a read whose distance
is the same in every instance of its template is counted once, weighted), because tracker.scope=all_steps
feeds it tens of thousands of events per run and its cost counts against the untracked run (target <= 1.25x).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sweep.trace.columns import Columns, Layout
from sweep.trace.trace import Trace
from sweep.trackers.base import TrackerBase, TrackerReport


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
    within its own trace (the cache tracker's per-event view; ARD itself reads Reads, never expanded)."""

    c: Columns
    seg: np.ndarray
    dists: np.ndarray
    n: int

    @classmethod
    def of(cls, traces: list[Trace]) -> "Distances":
        c, seg = Columns.of_many(traces)
        return cls(c, seg, template_distances(c), len(traces))


@dataclass
class StepTables:
    """Distances worked out per template and per instance: a read whose buffer was written earlier in its own
    segment has the same distance in every instance of the template (``local``, found over the templates'
    columns alone); any other read (``external``) measures from the buffer's last write in an earlier instance
    of the same trace: ``prev``, an (instances x buffers) table of last-write clocks (-1: none)."""

    off: np.ndarray  # per template event: its clock within the template
    local: np.ndarray  # per template event: its distance within the template, or -1
    external: np.ndarray  # per template event: a read before any write of its buffer in the template
    inst_start: np.ndarray  # per instance: the clock at its start
    prev: np.ndarray

    @classmethod
    def of(cls, L: Layout, nb: int) -> "StepTables":
        nt = len(L.t_len)
        flat_clock = np.cumsum(L.t_sizes) - L.t_sizes
        off = flat_clock - flat_clock[np.cumsum(L.t_len) - L.t_len][L.t_tpl]
        local = distances(Columns(L.t_write, L.t_sizes, L.t_codes, []), L.t_tpl * nb + L.t_codes)
        t_size = np.bincount(L.t_tpl, weights=L.t_sizes, minlength=nt).astype(np.int64)
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
        return cls(off, local, ~L.t_write & (local < 0), inst_start, prev)


def template_distances(c: Columns) -> np.ndarray:
    """distances() of every event, each within its own trace, from the StepTables of its templates."""
    L = c.layout
    assert L is not None
    if not len(L.seq):
        return np.zeros(0, dtype=np.int64)
    st = StepTables.of(L, len(c.names))
    pv = st.prev[L.inst, c.codes]
    clock = st.inst_start[L.inst] + st.off[L.pos]
    return np.where(st.external[L.pos], np.where(pv >= 0, clock - pv, -1), st.local[L.pos])


def external_reads(L: Layout, st: StepTables) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The external reads (StepTables) that have a distance, once per instance: (template event, instance,
    distance)."""
    nt = len(L.t_len)
    er = np.flatnonzero(st.external)
    per_te = np.bincount(L.t_tpl[er], minlength=nt)
    cnt = per_te[L.seq]
    ev = er[_spread(cnt, (np.cumsum(per_te) - per_te)[L.seq])]
    inst = np.repeat(np.arange(len(L.seq), dtype=np.int64), cnt)
    pv = st.prev[inst, L.t_codes[ev]]
    warm = pv >= 0
    ev, inst = ev[warm], inst[warm]
    return ev, inst, st.inst_start[inst] + st.off[ev] - pv[warm]


def _spread(counts: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Indices starts[0] .. starts[0]+counts[0]-1, starts[1] .., one block per entry, concatenated."""
    offs = np.cumsum(counts) - counts
    return np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(starts - offs, counts)


@dataclass
class Reads:
    """The reads of traces that have a distance, never expanded to the traces' events: a local read (StepTables)
    listed once per trace and template with ``weight`` = the template's occurrences in that trace, any other
    once per instance (weight 1). With per trace its writes and floats, and per buffer its writes and size."""

    seg: np.ndarray  # per listed read: its trace
    code: np.ndarray
    size: np.ndarray
    dist: np.ndarray
    weight: np.ndarray
    writes: np.ndarray  # per trace
    total_floats: np.ndarray  # per trace
    buffer_writes: np.ndarray  # per buffer, all traces
    buffer_size: np.ndarray  # per buffer: its largest event
    names: list[str]
    n: int
    layout: Layout
    external: tuple[np.ndarray, np.ndarray, np.ndarray]  # external_reads(): (template event, instance, distance)

    @classmethod
    def of(cls, traces: list[Trace]) -> "Reads":
        L, names = Layout.of_many(traces)
        n, nb, nt = len(traces), len(names), len(L.t_len)
        if not len(L.seq):
            e = np.zeros(0, dtype=np.int64)
            return cls(
                e,
                e,
                e,
                e,
                e,
                np.zeros(n),
                np.zeros(n),
                np.zeros(nb),
                np.zeros(nb, dtype=np.int64),
                names,
                n,
                L,
                (e, e, e),
            )
        st = StepTables.of(L, nb)
        occ = np.bincount(L.owner * nt + L.seq, minlength=n * nt).reshape(n, nt)
        # local reads: once per (trace, template) that occurs
        lr = np.flatnonzero(~L.t_write & (st.local >= 0))  # in template order
        per_t = np.bincount(L.t_tpl[lr], minlength=nt)
        tr, tp = np.nonzero(occ)
        ev_l = lr[_spread(per_t[tp], (np.cumsum(per_t) - per_t)[tp])]
        ev_e, inst, d_e = external_reads(L, st)
        ev = np.concatenate((ev_l, ev_e))
        dist = np.concatenate((st.local[ev_l], d_e))
        weight = np.concatenate((np.repeat(occ[tr, tp], per_t[tp]), np.ones(len(ev_e), dtype=np.int64)))
        seg = np.concatenate((np.repeat(tr, per_t[tp]), L.owner[inst]))
        t_writes = np.bincount(L.t_tpl[L.t_write], minlength=nt)
        t_floats = np.bincount(L.t_tpl, weights=L.t_sizes, minlength=nt)
        all_occ = occ.sum(axis=0)
        size = np.zeros(nb, dtype=np.int64)
        seen = all_occ[L.t_tpl] > 0
        np.maximum.at(size, L.t_codes[seen], L.t_sizes[seen])
        return cls(
            seg,
            L.t_codes[ev].astype(np.int64),
            L.t_sizes[ev],
            dist,
            weight,
            (occ * t_writes).sum(axis=1).astype(np.float64),
            (occ * t_floats).sum(axis=1),
            np.bincount(L.t_codes[L.t_write], weights=all_occ[L.t_tpl[L.t_write]], minlength=nb),
            size,
            names,
            n,
            L,
            (ev_e, inst, d_e),
        )


def ard_report(trace: Trace, r: Reads | None = None) -> TrackerReport:
    """``r``: Reads.of([trace]), if already made."""
    r = r or Reads.of([trace])
    return TrackerReport(ard_each([trace], r)[0], _buffer_table(r))


def ard_each(traces: list[Trace], r: Reads | None = None) -> list[dict[str, float]]:
    """ard_report(t).metrics for every trace, each on its own, in one vectorised pass over all of them (the
    all_steps per-epoch curves). ``r``: Reads.of(traces), if already made."""
    if not traces:
        return []
    r = r or Reads.of(traces)
    n, seg, w = r.n, r.seg, r.weight.astype(np.float64)
    ws = w * r.size
    den = np.bincount(seg, weights=ws, minlength=n)
    num = np.bincount(seg, weights=ws * r.dist, minlength=n)
    cols = {
        "ard": np.divide(num, den, out=np.zeros(n), where=den > 0),
        "reads": np.bincount(seg, weights=w, minlength=n),
        "writes": r.writes,
        "total_floats": r.total_floats.astype(np.float64),
        "dmc": np.bincount(seg, weights=ws * np.sqrt(r.dist.astype(np.float64)), minlength=n),
    }
    return [{k: float(v[i]) for k, v in cols.items()} for i in range(n)]


def _buffer_table(r: Reads) -> list[dict]:
    """Per buffer: largest size, reads (with a distance), writes, min/avg/max read distance."""
    nb = len(r.names)
    reads = np.bincount(r.code, weights=r.weight, minlength=nb)
    dsum = np.bincount(r.code, weights=r.weight * r.dist.astype(np.float64), minlength=nb)
    order = np.lexsort((r.dist, r.code))  # by buffer, then distance: each buffer's first and last are its min, max
    codes = r.code[order]
    present = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.zeros(0, dtype=np.int64)
    dmin, dmax = np.zeros(nb, dtype=np.int64), np.zeros(nb, dtype=np.int64)
    dmin[codes[present]] = r.dist[order][present]
    dmax[codes[present]] = r.dist[order][np.r_[present[1:], len(codes)] - 1] if len(codes) else 0
    table = []
    for b, name in enumerate(r.names):
        k = int(reads[b])
        table.append(
            {
                "buffer": name,
                "size": int(r.buffer_size[b]),
                "reads": k,
                "writes": int(r.buffer_writes[b]),
                "min_dist": int(dmin[b]) if k else None,
                "avg_dist": float(dsum[b] / k) if k else None,
                "max_dist": int(dmax[b]) if k else None,
            }
        )
    return table


@dataclass
class ARDTracker(TrackerBase):
    """tracker=ard."""

    name: str = "ard"

    def summarize(self, trace: Trace) -> TrackerReport:
        return ard_report(trace)

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        return ard_each(traces)
