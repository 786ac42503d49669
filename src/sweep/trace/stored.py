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

from sweep.trace.trace import OP_KINDS, READ, WRITE, Event, Trace

ARTIFACT = "trace.json"
# the most steps a stored trace unrolls to (a list of that many template ids: 0.8 GB): hours of traced steps
# for the fastest method; a larger count is a damaged file, refused before it exhausts memory
MAX_STEPS = 10**8
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
    """(the trace, its pieces by name, the steps one traced step stands for: 0 for none) from the artifact's text.
    ValueError, one line, for a text that is not such a trace (a run's file edited, cut short, or made by hand):
    the caller names the run and goes on with the others."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{ARTIFACT}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise ValueError(f"{ARTIFACT}: format {found!r}, this version of sweep reads format {FORMAT}")
    try:
        return _load(doc)
    except KeyError as e:
        raise ValueError(f"{ARTIFACT}: no {e.args[0]!r} entry, which format {FORMAT} has") from None
    except (TypeError, IndexError, AttributeError) as e:
        raise ValueError(f"{ARTIFACT}: not a format-{FORMAT} trace ({type(e).__name__}: {e})") from None


def _load(doc: dict[str, Any]) -> tuple[Trace, dict[str, Trace], int]:
    buffers = doc["buffers"]
    if not isinstance(buffers, list) or not all(isinstance(name, str) for name in buffers):
        raise ValueError(f"{ARTIFACT}: its buffers are not a list of names")
    templates = [_template(flat, buffers) for flat in doc["templates"]]

    def trace(entry: dict[str, Any]) -> Trace:
        runs = entry["seq"]
        ids, repeats = runs[0::2], runs[1::2]
        if len(ids) != len(repeats) or not all(isinstance(t, int) and 0 <= t < len(templates) for t in ids):
            raise ValueError(f"{ARTIFACT}: its seq is not pairs of (a template of the {len(templates)}, repeats)")
        if not all(isinstance(n, int) and n > 0 for n in repeats) or sum(repeats) > MAX_STEPS:
            raise ValueError(
                f"{ARTIFACT}: its seq repeats a step {max(repeats, key=abs):,} times, {sum(repeats):,} in all; "
                f"a run records between 1 and {MAX_STEPS:,}"
            )
        seq = [t for t, n in zip(ids, repeats) for t in [t] * n]
        compute = entry["compute"]
        if not all(k in OP_KINDS and _count(n) for k, n in compute.items()):
            raise ValueError(f"{ARTIFACT}: its compute counts are not counts of {', '.join(OP_KINDS)}: {compute}")
        return Trace.from_segments(templates, seq, compute)

    pieces = {k: trace(e) for k, e in doc["pieces"]}
    steps = doc.get("steps", 0)
    if not _count(steps) or (steps and len(pieces) != 2):  # a traced step's run: [the step before it, the step]
        raise ValueError(
            f"{ARTIFACT}: steps={steps!r} with {len(pieces)} piece(s): a run measured by one traced step "
            "has a count of steps and two pieces (the step before it, the step)"
        )
    return trace(doc["trace"]), pieces, steps


def _count(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def _template(flat: list[Any], buffers: list[Any]) -> tuple[Event, ...]:
    """A step's events from (buffer, op, size) triples: a buffer of the file's list, READ or WRITE, a size in floats
    (a negative size or buffer number was scored as if it were one: figures of nothing)."""
    events = [tuple(flat[i : i + 3]) for i in range(0, len(flat), 3)]
    for event in events:
        b, op, size = (*event, None, None)[:3]
        if not (_count(b) and b < len(buffers) and op in (READ, WRITE) and _count(size)):
            raise ValueError(
                f"{ARTIFACT}: an event {list(event)} is not (a buffer of the {len(buffers)}, {READ} or {WRITE}, "
                "a size >= 0)"
            )
    return tuple((op, buffers[b], size) for b, op, size in events)
