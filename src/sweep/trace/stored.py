"""A run's trace as a compact text artifact (``trace.json``), so that a tracker defined later can score runs
already recorded (``sweep-rescore``, docs/bytedmd.md) without solving them again.

What is kept is what every tracker reads: the step templates (events as buffer number, op, size), the order they
came in, run-length encoded, and the operation counts; for ``tracker.scope=all_steps`` also each epoch's piece
(its own order and counts, on the same templates), for the per-epoch curves. Its size grows with the distinct
steps and the changes from one to the next, not with the number of steps. Loaded back, the traces have exactly
the segments they were recorded with, so every tracker gives exactly the figures it gives on the live trace.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from sweep.trace.trace import Event, Trace

ARTIFACT = "trace.json"
FORMAT = 1  # bumped when the layout below changes; a loader refuses a format it does not know


def _runs(seq: list[int]) -> list[int]:
    """[template, repeats, template, repeats, ...]."""
    out: list[int] = []
    for t in seq:
        if out and out[-2] == t:
            out[-1] += 1
        else:
            out += [t, 1]
    return out


def dumps(trace: Trace, pieces: Mapping[str, Trace] | None = None, steps: int = 0) -> str:
    """The trace (and its named pieces, e.g. per epoch) as the artifact's text; ``steps``: the run is measured by
    one traced step, its pieces are [the step before it, the step] and the run took ``steps`` (TrackerBase.figures)."""
    names: dict[str, int] = {}
    templates: list[list[int]] = []
    ids: dict[tuple[Event, ...], int] = {}

    def entry(t: Trace) -> dict[str, Any]:
        tpls, seq = t.segments()
        local = []
        for tpl in tpls:
            tid = ids.get(tpl)
            if tid is None:
                tid = ids[tpl] = len(templates)
                templates.append([x for op, name, size in tpl for x in (names.setdefault(name, len(names)), op, size)])
            local.append(tid)
        return {"seq": _runs([local[i] for i in seq]), "compute": dict(t.compute_ops)}

    whole = entry(trace)
    parts = [[k, entry(p)] for k, p in (pieces or {}).items()]
    doc = {"format": FORMAT, "buffers": list(names), "templates": templates, "trace": whole, "pieces": parts}
    if steps:
        doc["steps"] = steps
    return json.dumps(doc, separators=(",", ":"))


def loads(text: str) -> tuple[Trace, dict[str, Trace], int]:
    """(the trace, its pieces by name, the steps one traced step stands for: 0 for none) from the artifact's text."""
    doc = json.loads(text)
    if doc.get("format") != FORMAT:
        raise ValueError(f"{ARTIFACT}: format {doc.get('format')!r}, this version of sweep reads format {FORMAT}")
    buffers = doc["buffers"]
    templates = [
        tuple((int(flat[i + 1]), buffers[flat[i]], int(flat[i + 2])) for i in range(0, len(flat), 3))
        for flat in doc["templates"]
    ]

    def trace(entry: dict[str, Any]) -> Trace:
        runs = entry["seq"]
        seq = [t for i in range(0, len(runs), 2) for t in [runs[i]] * runs[i + 1]]
        return Trace.from_segments(templates, seq, entry["compute"])

    return trace(doc["trace"]), {k: trace(e) for k, e in doc["pieces"]}, int(doc.get("steps", 0))
