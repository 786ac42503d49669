"""Replaying a segmented trace template by template, memoised on (state entering the segment, template).

A tracker that simulates a finite state (an LRU cache of buffers, the element-level LRU stack as runs of
elements) is a deterministic function of the state before a segment and the segment's events: the same pair
gives the same observations and the same next state. A whole-solve trace is a few templates (sweep.trackers.trace)
and in steady state the states repeat too (an SGD step rewrites every buffer it touches, so after one step the
state no longer depends on what came before it), so the simulation runs once per distinct (state, template)
pair and the rest of the trace costs one dictionary lookup per step.
"""
from __future__ import annotations

from typing import Callable, Generic, Hashable, TypeVar

from sweep.trackers.trace import Event, Trace

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
            sid = hit[0]
            out.append(hit[1])
        return tids, out
