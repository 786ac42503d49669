"""A trace as numpy columns, one entry per event, built from its templates (sweep.trace.trace).

A whole-solve trace is a few templates repeated thousands of times, so the columns are made per template (a
Python loop over a few hundred events) and expanded to the whole trace with numpy indexing, never per event in
Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sweep.trace.trace import READ, Event, Trace


@dataclass
class Layout:
    """Where the expanded events come from: the templates' own columns, one after another (``t_*``, with
    ``t_tpl`` the template of each), the template and trace of each instance (``seq``, ``owner``), and, made
    only when asked for, per expanded event its index in the template columns (``pos``) and its instance
    (``inst``)."""

    t_write: np.ndarray
    t_sizes: np.ndarray
    t_codes: np.ndarray
    t_tpl: np.ndarray
    seq: np.ndarray
    owner: np.ndarray

    @classmethod
    def of_many(cls, traces: list[Trace]) -> tuple["Layout", list[str]]:
        """The traces' templates as columns, and the buffer names in order of first use."""
        templates, seq, owner = joined_segments(traces)
        # buffer names in order of first use: the templates in order of first occurrence, each in event order
        first_seen = list(dict.fromkeys(seq))
        uniq = list(dict.fromkeys(e[1] for t in first_seen for e in templates[t]))
        index = {name: i for i, name in enumerate(uniq)}
        flat = [e for t in templates for e in t]
        # small integer codes sort by radix (argsort kind="stable"), several times faster than int64
        dtype = np.int16 if len(uniq) < 2**15 else np.int64
        t_len = np.array([len(t) for t in templates], dtype=np.int64)
        return cls(
            np.array([e[0] != READ for e in flat], dtype=bool),
            np.array([e[2] for e in flat], dtype=np.int64),
            np.array([index[e[1]] for e in flat], dtype=dtype),
            np.repeat(np.arange(len(templates), dtype=np.int64), t_len),
            np.asarray(seq, dtype=np.int64),
            np.asarray(owner, dtype=np.int64),
        ), uniq

    @cached_property
    def t_len(self) -> np.ndarray:
        """Events per template."""
        return np.bincount(self.t_tpl, minlength=int(self.t_tpl[-1]) + 1 if len(self.t_tpl) else 0)

    @cached_property
    def pos(self) -> np.ndarray:
        """Per event of the expanded trace: its index in the template columns."""
        lens = self.t_len[self.seq]
        offs = np.cumsum(lens) - lens  # where each instance starts in the expanded trace
        return np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(
            (np.cumsum(self.t_len) - self.t_len)[self.seq] - offs, lens
        )

    @cached_property
    def inst(self) -> np.ndarray:
        """Per event of the expanded trace: its instance."""
        return np.repeat(np.arange(len(self.seq), dtype=np.int64), self.t_len[self.seq])


@dataclass
class Columns:
    """A trace as arrays: op is write?, size, buffer code; and the buffer names in order of first use."""

    is_write: np.ndarray
    sizes: np.ndarray
    codes: np.ndarray
    names: list[str]
    layout: Layout | None = None  # set when built from templates

    @classmethod
    def of(cls, trace: Trace) -> "Columns":
        return cls.of_many([trace])[0]

    @classmethod
    def of_many(cls, traces: list[Trace]) -> tuple["Columns", np.ndarray]:
        """The columns of the traces one after another, and per event the index of the trace it came from."""
        L, names = Layout.of_many(traces)
        return cls(L.t_write[L.pos], L.t_sizes[L.pos], L.t_codes[L.pos], names, L), L.owner[L.inst]


def joined_segments(traces: list[Trace]) -> tuple[list[tuple[Event, ...]], list[int], list[int]]:
    """One template table for all the traces: (templates, seq, owner), owner[i] = the trace seq[i] came from."""
    ids: dict[tuple[Event, ...], int] = {}
    templates: list[tuple[Event, ...]] = []
    seq: list[int] = []
    owner: list[int] = []
    for i, trace in enumerate(traces):
        tpls, tseq = trace.segments()
        local = []
        for tpl in tpls:
            tid = ids.get(tpl)
            if tid is None:
                tid = ids[tpl] = len(templates)
                templates.append(tpl)
            local.append(tid)
        seq.extend([local[t] for t in tseq])
        owner.extend([i] * len(tseq))
    return templates, seq, owner
