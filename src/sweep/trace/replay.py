"""Replaying a segmented trace template by template, memoised on (state entering the segment, template).

A tracker that simulates a finite state (an LRU cache of buffers, the element-level LRU stack as runs of
elements) is a deterministic function of the state before a segment and the segment's events: the same pair
gives the same observations and the same next state. A whole-solve trace is a few templates (sweep.trace.trace)
and in steady state the states repeat too (an SGD step rewrites every buffer it touches, so after one step the
state no longer depends on what came before it), so the simulation runs once per distinct (state, template)
pair and the rest of the trace costs one dictionary lookup per step.
"""

from __future__ import annotations

from itertools import chain
from typing import Callable, Generic, Hashable, TypeVar

import numpy as np

from sweep.trace.trace import Event, Trace

S = TypeVar("S", bound=Hashable)  # the simulated state, hashable (tuples)
R = TypeVar("R")  # what one segment's simulation observed

Simulate = Callable[[S, tuple[Event, ...]], tuple[S, R]]


class Replay(Generic[S, R]):
    """The memo of one simulation, shared by every trace it replays (a run's whole trace and its epochs)."""

    def __init__(self, simulate: Simulate) -> None:
        self.simulate = simulate
        self.templates: list[tuple[Event, ...]] = []
        self._template_ids: dict[tuple[Event, ...], int] = {}
        self.states: list[S] = []
        self._state_ids: dict[S, int] = {}
        self.results: list[R] = []  # result id -> what the simulation observed
        self.result_template: list[int] = []  # result id -> the template it was observed on
        self.end: S | None = None  # the state the last run() ended in
        self._memo: dict[tuple[int, int], tuple[int, int]] = {}  # (state id, template id) -> (next state, result)

    def _state(self, state: S) -> int:
        sid = self._state_ids.get(state)
        if sid is None:
            sid = self._state_ids[state] = len(self.states)
            self.states.append(state)
        return sid

    def template_ids(self, trace: Trace) -> list[int]:
        """The trace's segments as template ids of this replay (the same template has the same id in every
        trace replayed here)."""
        tpls, seq = trace.segments()
        local = []
        for tpl in tpls:
            tid = self._template_ids.get(tpl)
            if tid is None:
                tid = self._template_ids[tpl] = len(self.templates)
                self.templates.append(tpl)
            local.append(tid)
        return [local[t] for t in seq]

    def run(self, trace: Trace, start: S) -> tuple[list[int], list[int]]:
        """(template ids, result ids), one per segment of the trace, simulated from ``start``."""
        tids = self.template_ids(trace)
        memo, states, templates, results = self._memo, self.states, self.templates, self.results
        sid = self._state(start)
        out = []
        for tid in tids:
            hit = memo.get((sid, tid))
            if hit is None:
                nxt, res = self.simulate(states[sid], templates[tid])
                hit = memo[(sid, tid)] = (self._state(nxt), len(results))
                results.append(res)
                self.result_template.append(tid)
            sid = hit[0]
            out.append(hit[1])
        self.end = states[sid]
        return tids, out

    def result_ids(self, traces: list[Trace], start: S, carry: bool) -> list[list[int]]:
        """Per trace, the result id of each of its segments: every trace from ``start``, or (carry) each from
        the state the previous one ended in."""
        out = []
        for trace in traces:
            out.append(self.run(trace, start)[1])
            if carry:
                start = self.end
        return out


class PerResult(Generic[R]):
    """A figure vector worked out once per distinct result of a replay (``figures(result, template)``), and
    summed per trace by how often each result occurs in it: a whole-solve trace's figures cost a few small
    numpy sums, never arrays over its events."""

    def __init__(self, replay: Replay, figures: Callable[[R, tuple[Event, ...]], np.ndarray], width: int) -> None:
        self.replay, self.figures, self.width = replay, figures, width
        self.rows: list[np.ndarray] = []
        self.memo: dict = {}  # other per-result figures a user keeps beside these (sweep.energy.model)

    def table(self) -> np.ndarray:
        """(results x figures), extended to every result the replay has seen."""
        rp = self.replay
        for r in range(len(self.rows), len(rp.results)):
            self.rows.append(
                np.asarray(self.figures(rp.results[r], rp.templates[rp.result_template[r]]), dtype=np.float64)
            )
        return np.array(self.rows).reshape(len(self.rows), self.width)

    def sums(self, rid_lists: list[list[int]]) -> np.ndarray:
        """(traces x figures): each trace's figures, the sum over its segments' results."""
        table = self.table()
        lens = [len(r) for r in rid_lists]
        flat = np.fromiter(chain.from_iterable(rid_lists), dtype=np.int64, count=sum(lens))
        row = np.repeat(np.arange(len(rid_lists)), lens)
        # per figure, a sum over segments in order (no traces x results table: results may be many)
        return np.stack(
            [np.bincount(row, weights=table[flat, j], minlength=len(rid_lists)) for j in range(self.width)], axis=1
        ).reshape(len(rid_lists), self.width)
