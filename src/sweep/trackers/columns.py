"""A trace as numpy columns, one entry per event, built from its templates (sweep.trackers.trace).

A whole-solve trace is a few templates repeated thousands of times, so the columns are made per template (a
Python loop over a few hundred events) and expanded to the whole trace with numpy indexing, never per event in
Python.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sweep.trackers.trace import READ, Event, Trace


@dataclass
class Layout:
    """Where the expanded events come from: the templates' own columns, one after another (``t_*``, with
    ``t_tpl`` the template of each), the template and trace of each instance (``seq``, ``owner``), and per
    expanded event its index in the template columns (``pos``) and its instance (``inst``)."""

    t_write: np.ndarray
    t_sizes: np.ndarray
    t_codes: np.ndarray
    t_tpl: np.ndarray
    seq: np.ndarray
    owner: np.ndarray
    pos: np.ndarray
    inst: np.ndarray


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
        templates, seq, owner = joined_segments(traces)
        # buffer names in order of first use: the templates in order of first occurrence, each in event order
        first_seen = list(dict.fromkeys(seq))
        uniq = list(dict.fromkeys(e[1] for t in first_seen for e in templates[t]))
        index = {name: i for i, name in enumerate(uniq)}
        flat = [e for t in templates for e in t]
        # small integer codes sort by radix (argsort kind="stable"), several times faster than int64
        dtype = np.int16 if len(uniq) < 2**15 else np.int64
        t_write = np.array([e[0] != READ for e in flat], dtype=bool)
        t_sizes = np.array([e[2] for e in flat], dtype=np.int64)
        t_codes = np.array([index[e[1]] for e in flat], dtype=dtype)
        t_len = np.array([len(t) for t in templates], dtype=np.int64)
        s, own = np.asarray(seq, dtype=np.int64), np.asarray(owner, dtype=np.int64)
        lens = t_len[s]
        offs = np.cumsum(lens) - lens  # where each instance starts in the expanded trace
        pos = np.arange(int(lens.sum()), dtype=np.int64) + np.repeat((np.cumsum(t_len) - t_len)[s] - offs, lens)
        inst = np.repeat(np.arange(len(s), dtype=np.int64), lens)
        layout = Layout(t_write, t_sizes, t_codes, np.repeat(np.arange(len(templates), dtype=np.int64), t_len),
                        s, own, pos, inst)
        return cls(t_write[pos], t_sizes[pos], t_codes[pos], uniq, layout), own[inst]


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
