"""The memory-access trace every tracker is fed from.

A method is instrumented once: it calls ``trace.read(name, size)`` / ``trace.write(name, size)`` where it
really touches a buffer, and ``trace.compute(kind, count)`` for the arithmetic it does, counted per element
(order does not matter, so counts are summed per kind; the energy tracker prices each kind per operation).
The kinds (``OP_KINDS``), kept few so that a price list stays short:

- ``fma``: a multiply-add, the inner step of a dot product: a (B, n) @ (n, H) matmul is B*n*H of them (so is
  a sum of squares); a lone ``a * b + c`` of arrays counts as one too;
- ``add``: an addition or subtraction (bias adds, sums along an axis: B*H for summing (B, H) over B, update
  steps ``p -= g``);
- ``mul``: a multiplication (scaling by a constant, masks applied as products);
- ``div``: a division; ``sqrt``, ``exp``: the transcendental ones (forward-forward's norm and sigmoid);
- ``cmp``: a comparison (margins, relu masks, equality tests);
- ``max``: a max against a value (relu itself);
- ``sign``: taking a sign (sign-SGD);
- ``xor``: a word-wide XOR of bit-packed rows (GF(2) elimination), counted per machine word of 64 bits.

Trackers (ard, cache, dmd) are pure functions of the recorded events, so adding a tracker never touches a
method. ``NullTrace`` is what runs when tracking is off: its calls do nothing.
"""

from __future__ import annotations

import math
from numbers import Integral
from typing import Any, Iterable, Iterator

import numpy as np

READ = 0
WRITE = 1
OP_KINDS = ("fma", "add", "mul", "div", "sqrt", "exp", "cmp", "max", "sign", "xor")
_OP_KINDS = frozenset(OP_KINDS)  # the membership test of every compute call


Event = tuple[int, str, int]  # (op, buffer, size)


class Trace:
    """An ordered sequence of (op, buffer, size) events; op is READ or WRITE, size counts floats.

    Stored as *segments*: the recording loop calls ``end_step()`` after every training step, and the events since
    the last call are interned as one template (a tuple of events). A training step's events are the same every
    step but for a few branches (SGD's margin test), so a whole-solve trace is a handful of templates plus the
    order they came in (``templates``, ``seq``), not millions of events; the trackers work per template and
    memoise over repeats (sweep.trace.replay). A step recorded event by event is compared with the previous
    template; SGD's loop records each kind of step once and appends it after (``add_step``; its test checks
    the result equals recording every step). ``events`` is the flat view."""

    def __init__(self, events: Iterable[Event] = (), enabled: bool = True) -> None:
        self.enabled = enabled
        self.compute_ops: dict[str, int] = {}  # operation kind -> count
        # values that left the arrays as Python values while an automatic tracer recorded (sweep.trace.auto): work
        # done outside the traced arrays; 0 for a hand trace, which does not look
        self.escaped = 0
        self.templates: list[tuple[Event, ...]] = []  # distinct segments
        self.seq: list[int] = []  # template ids, in order
        self._ids: dict[tuple[Event, ...], int] = {}
        self._open: list[Event] = []  # events since the last end_step()
        self._last: tuple[int, list[Event]] = (-1, [])  # the last template closed, as (id, events)
        self._last_tpl: tuple[Event, ...] = ()  # ... and as the interned tuple (add_step's identity test)
        if events:
            self._open.extend(events)
            self.end_step()

    # `size` is a float count or the array itself: callers pass arrays so that an untracked step (NullTrace)
    # never pays for computing sizes. Literals, not READ/WRITE: a global lookup per event is measurable here.
    # numpy arrays' sizes are read inline: a function call per event is measurable here.
    def read(self, name: str, size: "int | Any") -> None:
        self._open.append(
            (0, name, size if size.__class__ is int else size.size if size.__class__ is _ndarray else _size(size))
        )

    def write(self, name: str, size: "int | Any") -> None:
        self._open.append(
            (1, name, size if size.__class__ is int else size.size if size.__class__ is _ndarray else _size(size))
        )

    def compute(self, kind: str, count: "int | Any") -> None:
        """``count`` operations of ``kind`` (an int, or an array: one operation per element); ``kind`` must be
        one of OP_KINDS, so that every count recorded has a price in each energy hierarchy."""
        if kind not in _OP_KINDS:
            raise ValueError(f"Trace.compute: unknown operation kind {kind!r}; OP_KINDS: {', '.join(OP_KINDS)}")
        c = self.compute_ops
        c[kind] = c.get(kind, 0) + (
            count if count.__class__ is int else count.size if count.__class__ is _ndarray else _size(count)
        )

    def rename_open(self, old: str, new: str) -> None:
        """Call buffer ``old`` ``new`` in the events not closed into a segment yet: an automatic tracer names a
        result after the fact (a method's new weight matrix that takes over the name of the one it replaces)."""
        self._open[:] = [(op, new if name == old else name, size) for op, name, size in self._open]

    def since(self, before: int, ops: dict[str, int]) -> "Trace":
        """The steps taken since this trace held `before` segments and `ops` operation counts, as a Trace of their
        own (a traced step of a longer run: sweep.methods.lm.train, sweep.challenge.sampled_steps)."""
        tpls, seq = self.segments()
        one = Trace([e for t in seq[before:] for e in tpls[t]])
        one.compute_ops = {k: v - ops.get(k, 0) for k, v in self.compute_ops.items() if v - ops.get(k, 0)}
        return one

    def end_step(self) -> None:
        """Close the events recorded since the last call as one segment (a no-op if there are none)."""
        ev = self._open
        if not ev:
            return
        if ev == self._last[1]:  # most steps repeat the previous one: one list comparison, no hashing
            self.seq.append(self._last[0])
        else:
            tid = self._intern(tuple(ev))
            self.seq.append(tid)
            self._last, self._last_tpl = (tid, ev[:]), self.templates[tid]
        ev.clear()

    def add_step(self, tpl: tuple[Event, ...], ops: dict[str, int], escaped: int = 0) -> None:
        """Append a whole step recorded before: its events ``tpl`` (an interned template of another trace, see
        ``segments()``), its operation counts ``ops`` and its escaped values, exactly as if its calls were made
        again. The recording loop uses it for a step whose events it knows already (sgd.train_epochs), so a
        repeated step costs one call instead of one per event."""
        self.end_step()
        self.escaped += escaped
        if tpl is self._last_tpl:  # the same step as the previous one: no hashing
            self.seq.append(self._last[0])
        else:
            tid = self._intern(tpl)
            self.seq.append(tid)
            self._last, self._last_tpl = (tid, list(tpl)), self.templates[tid]
        c = self.compute_ops
        for kind, n in ops.items():
            c[kind] = c.get(kind, 0) + n

    @classmethod
    def from_segments(
        cls, templates: list[tuple[Event, ...]], seq: Iterable[int], compute_ops: dict[str, int]
    ) -> "Trace":
        """The trace templates[seq[0]] + templates[seq[1]] + ... with these operation counts (a stored trace,
        sweep.trace.stored), segmented as it was recorded."""
        t = cls()
        ids = {}
        for i in seq:
            tid = ids.get(i)
            if tid is None:
                tid = ids[i] = t._intern(templates[i])
            t.seq.append(tid)
        t.compute_ops = dict(compute_ops)
        return t

    def _intern(self, tpl: tuple[Event, ...]) -> int:
        tid = self._ids.get(tpl)
        if tid is None:
            tid = self._ids[tpl] = len(self.templates)
            self.templates.append(tpl)
        return tid

    def segments(self) -> tuple[list[tuple[Event, ...]], list[int]]:
        """(templates, seq): the trace is templates[seq[0]] + templates[seq[1]] + ... (open events closed)."""
        self.end_step()
        return self.templates, self.seq

    @property
    def events(self) -> list[Event]:
        """The flat event list (tests, small traces; trackers read segments())."""
        tpls, seq = self.segments()
        return [e for t in seq for e in tpls[t]]

    def __len__(self) -> int:
        lens = [len(t) for t in self.templates]
        return sum(lens[t] for t in self.seq) + len(self._open)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def extend(self, other: "Trace") -> None:
        """Append other's events (and add its operation counts)."""
        self.end_step()
        tpls, seq = other.segments()
        ids = [self._intern(t) for t in tpls]
        self.seq.extend([ids[t] for t in seq])
        for kind, n in other.compute_ops.items():
            self.compute_ops[kind] = self.compute_ops.get(kind, 0) + n
        self.escaped += other.escaped

    def columns(self) -> tuple[list[int], list[str], list[int]]:
        """(ops, names, sizes), one entry per event."""
        ev = self.events  # three comprehensions beat zip(*ev), which unpacks every event as an argument
        return [e[0] for e in ev], [e[1] for e in ev], [e[2] for e in ev]

    @property
    def ops(self) -> list[int]:
        return self.columns()[0]

    @property
    def names(self) -> list[str]:
        return self.columns()[1]

    @property
    def sizes(self) -> list[int]:
        return self.columns()[2]

    @classmethod
    def from_text(cls, text: str) -> "Trace":
        """Parse the spec notation: one event per token group, e.g. ``"W W1 100, R W1 100"``."""
        t = cls()
        for item in text.replace("\n", ",").split(","):
            item = item.strip().strip("`")
            if not item:
                continue
            op, name, size = item.split()
            (t.write if op == "W" else t.read)(name, int(size))
        return t


class NullTrace(Trace):
    """Tracking off: every call is a no-op, so an untracked run pays nothing but a method call."""

    def __init__(self) -> None:
        super().__init__(enabled=False)

    def read(self, name: str, size: "int | Any") -> None:  # noqa: D102 - intentionally empty
        pass

    def write(self, name: str, size: "int | Any") -> None:  # noqa: D102
        pass

    def compute(self, kind: str, count: "int | Any") -> None:  # noqa: D102
        pass

    def end_step(self) -> None:  # noqa: D102
        pass

    def rename_open(self, old: str, new: str) -> None:  # noqa: D102
        pass

    def add_step(self, tpl: tuple[Event, ...], ops: dict[str, int], escaped: int = 0) -> None:  # noqa: D102
        pass


NULL_TRACE = NullTrace()


def numel(a: Any) -> int:
    """Number of elements of a numpy or torch array (or anything with .shape)."""
    return int(math.prod(a.shape))


_ndarray = np.ndarray


def _size(s: Any) -> int:
    """A trace event's size: an integer as given (numpy integers too), an array's element count."""
    return int(s) if isinstance(s, Integral) else numel(s)
