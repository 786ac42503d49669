"""The element-level LRU stack pass that DMD and the energy model both read (one pass, shared).

Every float is an element (buffer, index); an event touches its buffer's elements 0..size-1 in order. Elements
sit on a stack ordered by their last *touch*; what counts as a touch is the one difference between the users:

- DMD (``reads_move=False``): only writes touch; a read observes its elements' depths and moves nothing, and a
  never-written element has depth stack size + 1 (the group's DMD).
- LRU (``reads_move=True``, the energy model): reads and writes both touch, and every access is observed. The
  depth of an access is the number of distinct elements touched since that element's previous access, itself
  included (Mattson et al. 1970: an LRU memory of capacity C serves exactly the accesses with depth <= C, so one
  pass serves every level of a hierarchy). A first touch has no depth: ``COLD``.

The stack is kept as *runs*, not elements, because events touch whole buffers: a touch of buffer b, size s,
puts the run (b, 0..s-1) on top and cuts 0..s-1 out of b's older runs. So each buffer's elements form a
staircase (the newest touch covers 0..s0-1, an older, longer one s0..s1-1, ...), the whole stack is a short
list of runs (about one per buffer), and for a run (b, lo..hi-1) with A elements in the runs above it the
element at index j has depth A + hi - j when nothing moves during the access (DMD: consecutive depths, step
-1). When the access itself touches (LRU), the elements lo..j-1 it touched just before j also count, so every
element of the run has the same depth A + hi - lo (step 0).

The stack of runs is a small hashable state, so the pass is memoised per (state, segment) by
sweep.trace.replay: a whole-solve trace costs one simulation per distinct (state, step template), not one
per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Iterator

import numpy as np

from sweep.trace.replay import Replay
from sweep.trace.trace import READ, Event, Trace

COLD = 0  # LRU depth of a first touch (real depths are >= 1)

Stack = tuple[tuple[str, int, int], ...]  # runs (buffer, lo, hi), top of the stack first


@dataclass
class DepthRuns:
    """The observed accesses of a trace, in trace order, as runs of elements: run i covers ``count[i]`` elements
    of event ``event[i]`` (a write if ``is_write[i]``), whose depths in index order are first[i],
    first[i] + step[i], ... (step -1: consecutive depths; 0: all the same, e.g. COLD or stack size + 1)."""

    event: np.ndarray
    is_write: np.ndarray
    first: np.ndarray
    step: np.ndarray
    count: np.ndarray


def _simulate(reads_move: bool, state: Stack, events: tuple[Event, ...]) -> tuple[Stack, np.ndarray]:
    """One segment from stack ``state``: the next stack and the observed runs as rows
    (position in the segment, is write, first depth, step, count)."""
    stack = list(state)
    total = sum(hi - lo for _, lo, hi in stack)  # distinct elements ever touched
    step = 0 if reads_move else -1
    rows: list[tuple[int, int, int, int, int]] = []
    for pos, (op, name, size) in enumerate(events):
        if size <= 0:
            continue
        observe, move = reads_move or op == READ, reads_move or op != READ
        # one walk down the stack does both: observe (the depth of b's runs) and move (cut 0..size-1 out of b's
        # runs, to put them on top); the LRU pass does both for every access, DMD one or the other
        above = covered = top = 0
        new = [(name, 0, size)] if move else stack
        for run in stack:
            b, lo, hi = run
            if b == name:
                if observe and lo < size:  # b's runs come in index order: newer touches cover lower indices
                    rows.append((pos, op, above + hi - lo, step, (hi if hi < size else size) - lo))
                    covered = hi
                if move:
                    if hi > top:
                        top = hi
                    if lo >= size:
                        new.append(run)
                    elif hi > size:
                        new.append((name, size, hi))
            elif move:
                new.append(run)
            above += hi - lo
        if observe and size > covered:  # never touched: cold
            rows.append((pos, op, COLD if reads_move else total + 1, 0, size - covered))
        if move:
            total += max(0, size - top)
            stack = new
    return tuple(stack), np.array(rows, dtype=np.int64).reshape(-1, 5)


def stack_replay(reads_move: bool = False) -> Replay:
    """A memo for depth_runs; pass the same one for every trace of a run (its epochs) to share the work."""
    return Replay(partial(_simulate, reads_move))


def depth_runs(trace: Trace, reads_move: bool = False, replay: Replay | None = None) -> DepthRuns:
    """The depths of the trace's observed accesses (see DepthRuns), from an empty stack."""
    replay = replay or stack_replay(reads_move)
    tids, rids = replay.run(trace, ())
    parts = [replay.results[r] for r in rids]
    rows = np.concatenate(parts) if parts else np.zeros((0, 5), dtype=np.int64)
    t_len = np.array([len(t) for t in replay.templates], dtype=np.int64)
    lens = t_len[np.asarray(tids, dtype=np.int64)]
    offs = np.cumsum(lens) - lens  # each segment's first event
    event = rows[:, 0] + np.repeat(offs, [len(p) for p in parts])
    return DepthRuns(event, rows[:, 1] != READ, rows[:, 2], rows[:, 3], rows[:, 4])


def stack_runs(trace: Trace, reads_move: bool = False) -> Iterator[tuple[int, int, int, int]]:
    """depth_runs as tuples (event index, first depth, step, count), in trace order."""
    r = depth_runs(trace, reads_move)
    return zip(r.event.tolist(), r.first.tolist(), r.step.tolist(), r.count.tolist())
