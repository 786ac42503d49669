"""ByteDMD's stack: an LRU stack that holds only live elements, priced one operation at a time (docs/bytedmd.md).

The trace has no operation boundaries, so they are drawn from its order: an **operation** is a maximal run of
reads and the writes that follow it, within one step (segment). Every element (buffer, index) read by an
operation is priced at its depth in the stack as it was before the operation; then the operation's distinct
input elements move to the top in the order they were first read, and its outputs are pushed on top. An element
whose next touch is a write, or that is never touched again after a read, is dead and leaves the stack at once
(liveness); a value never touched again after it was written is a result of the trace and stays to the end if
its buffer is one the trace reads (state, like the weights a step updates), and leaves at once if the trace
never reads that buffer (an unused temporary). The elements whose first touch is a read are the trace's
inputs: all of them are on the stack from the start, in the order of their first reads (the first one read on
top).

As in sweep.trace.stack the stack is kept as *runs* of elements (buffer, lo, hi), top first, with the higher
indices on top (an event touches 0..size-1 in order), so a read of a run with A elements above it sees the
consecutive depths A + 1 .. A + (hi - lo). Liveness needs the future: what an element's next touch is. That is
a per-buffer summary of the rest of the trace (``Future``: the indices touched again, and those whose next touch
is a read), computed backwards over the segments; a segment's simulation is a function of (the stack before it,
its template, the summary after it restricted to its own buffers, which of them the trace reads), so it is
memoised on those and a whole-solve trace costs one simulation per distinct combination, not one per step.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from sweep.trace.trace import READ, WRITE, Event, Trace

Run = tuple[str, int, int]  # (buffer, lo, hi): elements lo..hi-1, hi-1 on top
Stack = tuple[Run, ...]  # top first
Spans = tuple[tuple[int, int], ...]  # disjoint index intervals [lo, hi), ascending
# per buffer (sorted by name): (buffer, indices < t are touched again, the indices whose next touch is a read)
Future = tuple[tuple[str, int, Spans], ...]
Access = tuple[str, int, int]  # (buffer, size, position in the segment)
Operation = tuple[tuple[Access, ...], tuple[Access, ...]]  # (reads, writes)


def operations(events: Iterable[Event]) -> list[Operation]:
    """The segment's events cut into operations: a read after a write starts the next one."""
    ops: list[Operation] = []
    reads: list[Access] = []
    writes: list[Access] = []
    for pos, (op, name, size) in enumerate(events):
        if size <= 0:
            continue
        if op == READ:
            if writes:
                ops.append((tuple(reads), tuple(writes)))
                reads, writes = [], []
            reads.append((name, size, pos))
        else:
            writes.append((name, size, pos))
    if reads or writes:
        ops.append((tuple(reads), tuple(writes)))
    return ops


def _with_prefix(spans: Spans, size: int) -> Spans:
    """spans ∪ [0, size)."""
    hi = size
    rest = []
    for lo, h in spans:
        if lo <= hi:
            hi = max(hi, h)
        else:
            rest.append((lo, h))
    return ((0, hi), *rest)


def _without_prefix(spans: Spans, size: int) -> Spans:
    """spans minus [0, size)."""
    return tuple((max(lo, size), hi) for lo, hi in spans if hi > size)


def _back(future: dict[str, tuple[int, Spans]], events: Iterable[tuple[int, str, int]]) -> None:
    """``future`` (after the events) becomes the future before them: walked backwards, a read makes 0..size-1
    read next, a write makes them written next; both mark them touched again."""
    for op, name, size in events:
        if size <= 0:
            continue
        t, spans = future.get(name, (0, ()))
        future[name] = (max(t, size), _with_prefix(spans, size) if op == READ else _without_prefix(spans, size))


def _cut(stack: list[Run], sizes: dict[str, int]) -> list[Run]:
    """The stack without the elements 0..sizes[b]-1 of each buffer b in ``sizes``."""
    out = []
    for run in stack:
        s = sizes.get(run[0])
        if s is None or run[1] >= s:
            out.append(run)
        elif run[2] > s:
            out.append((run[0], s, run[2]))
    return out


def _keep(run: Run, touched: int, keep: Spans) -> list[Run]:
    """The pieces of ``run`` that stay: indices >= ``touched`` (not touched by the operation) and those in ``keep``,
    top (highest indices) first."""
    b, lo, hi = run
    out = [(b, max(lo, touched), hi)] if hi > touched else []
    for k_lo, k_hi in reversed(keep):
        a, z = max(lo, k_lo), min(hi, touched, k_hi)
        if a < z:
            out.append((b, a, z))
    return out


def _merge(stack: Iterable[Run]) -> Stack:
    """Adjacent runs of one buffer with contiguous indices as one run (the canonical state the memo sees)."""
    out: list[Run] = []
    for run in stack:
        if out and out[-1][0] == run[0] and out[-1][1] == run[2]:
            out[-1] = (run[0], run[1], out[-1][2])
        else:
            out.append(run)
    return tuple(out)


def simulate(
    state: Stack, ops: list[Operation], after: dict[str, tuple[int, Spans]], kept: frozenset[str]
) -> tuple[Stack, np.ndarray]:
    """One segment's operations from stack ``state``, with ``after`` the future after the segment (its buffers at
    least) and ``kept`` the buffers whose values never touched again stay (those the trace reads somewhere): the
    next stack and the priced reads as rows (position in the segment, first depth, count): the read's elements
    have the depths first, first + 1, ..., first + count - 1."""
    # each operation's future, for the buffers it touches (the others keep what they were)
    future = dict(after)
    fut_after: list[dict[str, tuple[int, Spans]]] = [{}] * len(ops)
    for i in range(len(ops) - 1, -1, -1):
        reads, writes = ops[i]
        fut_after[i] = {name: future.get(name, (0, ())) for name, _, _ in (*reads, *writes)}
        _back(future, ((WRITE, n, s) for n, s, _ in reversed(writes)))
        _back(future, ((READ, n, s) for n, s, _ in reversed(reads)))
    stack = list(state)
    rows: list[tuple[int, int, int]] = []
    for (reads, writes), fut in zip(ops, fut_after):
        moved: dict[str, int] = {}  # buffer -> its elements 0..moved-1 are inputs of this operation
        if reads:
            # the inputs' runs, with the elements above each, in one walk of the stack before the operation
            where: dict[str, list[tuple[int, int, int]]] = {name: [] for name, _, _ in reads}
            above = 0
            for b, lo, hi in stack:
                if b in where:
                    where[b].append((lo, hi, above))
                above += hi - lo
            chunks = []
            for name, size, pos in reads:  # all priced against that stack
                found = 0
                for lo, hi, above in where[name]:
                    if lo < size:
                        top = hi if hi < size else size
                        rows.append((pos, above + hi - top + 1, top - lo))
                        found += top - lo
                if found != size:  # every read element is live by construction (inputs are loaded at the start)
                    raise AssertionError(f"ByteDMD: {size - found} element(s) of {name!r} read but not on the stack")
                m = moved.get(name, 0)
                if size > m:  # the elements not already moved, in read order
                    chunks.append((name, m, size))
                    moved[name] = size
            stack = chunks[::-1] + _cut(stack, moved)
        written: dict[str, int] = {}
        for name, size, _ in writes:  # outputs on top; an element written twice keeps the later value
            stack = [(name, 0, size)] + _cut(stack, {name: size})
            written[name] = max(written.get(name, 0), size)
        # liveness of what the operation touched: a value read here stays if its next touch is a read; a value
        # written here stays if its next touch is a read, or if there is none and its buffer is one the trace
        # reads (a result of the trace: state such as the weights a step updates)
        rule = {}
        for name in {*moved, *written}:
            t, spans = fut[name]
            w = written.get(name, 0)
            keep = _with_span(spans, t, w) if w > t and name in kept else spans
            rule[name] = (max(moved.get(name, 0), w), keep)
        stack = [piece for run in stack for piece in _pieces(run, rule)]
    return _merge(stack), np.array(rows, dtype=np.int64).reshape(-1, 3)


def _with_span(spans: Spans, lo: int, hi: int) -> Spans:
    """spans ∪ [lo, hi), for lo >= every span's end (the results: indices past the touched-again bound)."""
    if spans and spans[-1][1] == lo:
        return (*spans[:-1], (spans[-1][0], hi))
    return (*spans, (lo, hi))


def _pieces(run: Run, rule: dict[str, tuple[int, Spans]]) -> list[Run]:
    r = rule.get(run[0])
    return [run] if r is None else _keep(run, *r)


def inputs(templates: list[tuple[Event, ...]], seq: Iterable[int]) -> Stack:
    """The starting stack: the elements whose first touch is a read, in the order of their first reads, the
    first on top. Only a template's first occurrence can hold a first touch (the later ones touch nothing new)."""
    covered: dict[str, int] = {}
    runs: list[Run] = []
    for tid in dict.fromkeys(seq):
        for op, name, size in templates[tid]:
            c = covered.get(name, 0)
            if size > c:
                if op == READ:
                    runs.append((name, c, size))
                covered[name] = size
    return tuple(runs)


class LiveReplay:
    """The memo of the live-stack pass, shared by every trace of a run (its whole trace and its epochs). It keeps
    what sweep.trace.replay.PerResult reads: ``results`` (per distinct simulation, its rows), ``templates`` and
    ``result_template``."""

    def __init__(self) -> None:
        self.templates: list[tuple[Event, ...]] = []
        self._template_ids: dict[tuple[Event, ...], int] = {}
        self._ops: list[list[Operation]] = []
        self._buffers: list[tuple[str, ...]] = []  # per template, the buffers it touches, sorted
        self.results: list[np.ndarray] = []
        self.result_template: list[int] = []
        self._ids: dict = {}  # interned states and futures
        self._values: list = []
        self._back: dict[tuple[int, int], tuple[int, int]] = {}  # (template, future after) -> (before, restricted)
        # (stack, template, restricted future, kept buffers) -> (next stack, result)
        self._memo: dict[tuple[int, int, int, int], tuple[int, int]] = {}

    def _id(self, value) -> int:
        i = self._ids.get(value)
        if i is None:
            i = self._ids[value] = len(self._values)
            self._values.append(value)
        return i

    def _template(self, tpl: tuple[Event, ...]) -> int:
        tid = self._template_ids.get(tpl)
        if tid is None:
            tid = self._template_ids[tpl] = len(self.templates)
            self.templates.append(tpl)
            self._ops.append(operations(tpl))
            self._buffers.append(tuple(sorted({e[1] for e in tpl})))
        return tid

    def run(self, traces: list[Trace]) -> list[list[int]]:
        """Per trace, the result id of each of its segments: the traces as consecutive pieces of one trace (one
        stack carried through them, liveness seen across them), from its inputs."""
        tids: list[int] = []
        lens = []
        for trace in traces:
            tpls, seq = trace.segments()
            local = [self._template(t) for t in tpls]
            tids += [local[t] for t in seq]
            lens.append(len(seq))
        # the future after each segment, backwards from the end (nothing touched again)
        keys = [0] * len(tids)
        fid = self._id(("future", ()))
        for i in range(len(tids) - 1, -1, -1):
            hit = self._back.get((tids[i], fid))
            if hit is None:
                future = {b: (t, s) for b, t, s in self._values[fid][1]}
                names = self._buffers[tids[i]]
                restricted = tuple((b, *future[b]) for b in names if b in future)
                _back(future, reversed(self.templates[tids[i]]))
                before: Future = tuple(sorted((b, t, s) for b, (t, s) in future.items()))
                hit = self._back[(tids[i], fid)] = (self._id(("future", before)), self._id(("after", restricted)))
            fid, keys[i] = hit
        sid = self._id(("stack", inputs(self.templates, tids)))
        distinct = list(dict.fromkeys(tids))
        read = {e[1] for tid in distinct for e in self.templates[tid] if e[0] == READ and e[2] > 0}
        kept = {tid: self._id(("kept", frozenset(b for b in self._buffers[tid] if b in read))) for tid in distinct}
        out: list[int] = []
        for tid, key in zip(tids, keys):
            hit = self._memo.get((sid, tid, key, kept[tid]))
            if hit is None:
                after = {b: (t, s) for b, t, s in self._values[key][1]}
                nxt, rows = simulate(self._values[sid][1], self._ops[tid], after, self._values[kept[tid]][1])
                hit = self._memo[(sid, tid, key, kept[tid])] = (self._id(("stack", nxt)), len(self.results))
                self.results.append(rows)
                self.result_template.append(tid)
            sid = hit[0]
            out.append(hit[1])
        split = np.cumsum(lens)[:-1].tolist()
        return [out[a:b] for a, b in zip([0, *split], [*split, len(out)])]
