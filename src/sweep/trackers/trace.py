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

from dataclasses import dataclass, field
import math
from numbers import Integral
from typing import Any, Iterator

READ = 0
WRITE = 1
OP_KINDS = ("fma", "add", "mul", "div", "sqrt", "exp", "cmp", "max", "sign", "xor")
_OP_KINDS = frozenset(OP_KINDS)  # the membership test of every compute call


@dataclass
class Trace:
    """An ordered list of (op, buffer, size) events; op is READ or WRITE, size counts floats.

    One tuple per event, appended in one call: tracker.scope=all_steps records every event of every training
    step, so recording is kept as cheap as Python allows (trackers vectorise over ``columns()``)."""

    events: list[tuple[int, str, int]] = field(default_factory=list)
    enabled: bool = True
    compute_ops: dict[str, int] = field(default_factory=dict)  # operation kind -> count

    # `size` is a float count or the array itself: callers pass arrays so that an untracked step (NullTrace)
    # never pays for computing sizes. Literals, not READ/WRITE: a global lookup per event is measurable here.
    def read(self, name: str, size: "int | Any") -> None:
        self.events.append((0, name, size if size.__class__ is int else _size(size)))

    def write(self, name: str, size: "int | Any") -> None:
        self.events.append((1, name, size if size.__class__ is int else _size(size)))

    def compute(self, kind: str, count: "int | Any") -> None:
        """``count`` operations of ``kind`` (an int, or an array: one operation per element); ``kind`` must be
        one of OP_KINDS, so that every count recorded has a price in each energy hierarchy."""
        if kind not in _OP_KINDS:
            raise ValueError(f"Trace.compute: unknown operation kind {kind!r}; OP_KINDS: {', '.join(OP_KINDS)}")
        c = self.compute_ops
        c[kind] = c.get(kind, 0) + (count if count.__class__ is int else _size(count))

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[tuple[int, str, int]]:
        return iter(self.events)

    def extend(self, other: "Trace") -> None:
        self.events.extend(other.events)
        for kind, n in other.compute_ops.items():
            self.compute_ops[kind] = self.compute_ops.get(kind, 0) + n

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


NULL_TRACE = NullTrace()


def numel(a: Any) -> int:
    """Number of elements of a numpy or torch array (or anything with .shape)."""
    return int(math.prod(a.shape))


def _size(s: Any) -> int:
    """A trace event's size: an integer as given (numpy integers too), an array's element count."""
    return int(s) if isinstance(s, Integral) else numel(s)
