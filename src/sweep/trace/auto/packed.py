"""PackedInt: a Python int holding bit-packed words that records its operations in a NumpyTracer.

Some work leaves the arrays on purpose: GF(2) elimination XORs whole packed rows as Python ints (one machine-word
loop inside the int, far faster than any array operation on a row), where no array wrapper sees it. A PackedInt is
such an int that does not leave the trace: every arithmetic or bitwise operation on it is an operation of the
trace, reading its PackedInt operands and writing its result (a new buffer, named by operation and position like a
numpy temporary), and its arithmetic counted (``xor`` for the bitwise ones, sweep.trace.auto.kinds); a value that
leaves it (``bool()``, a dict lookup's hash, a comparison, ``bit_length()``) is a read counted in ``escaped``.

The unit: one element of the trace is one 64-bit word, eight bytes like a float64, so a row of n + 1 bits is
ceil((n + 1) / 64) elements for every tracker (the float-counted ones count it as that many floats; ByteDMD at
``bytes_per_element`` b as that many elements of b bytes). The hand trace of gf2 counts in the same unit.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from sweep.trace.auto.numpy_tracer import NumpyTracer

WORD_BITS = 64


def words(value: int) -> int:
    """Elements (64-bit words) a value occupies: at least one."""
    return max(1, -(-abs(value).bit_length() // WORD_BITS))


class PackedInt(int):
    """An int whose operations are recorded by ``tracer`` into its trace; ``name`` is the buffer it lives in."""

    tracer: NumpyTracer
    name: str

    def __new__(cls, value: int, tracer: NumpyTracer, name: str) -> "PackedInt":
        self = super().__new__(cls, value)
        self.tracer, self.name = tracer, name
        return self


def _operation(op: str, kind: str, method: Callable) -> Callable:
    """A binary or unary int operation recorded as one operation of the trace."""

    def run(self: PackedInt, *other: Any) -> Any:
        value = method(int.__int__(self), *(int.__int__(o) if isinstance(o, int) else o for o in other))
        if value is NotImplemented:
            return value
        t = self.tracer
        trace, rec = t.trace, t.rec
        size = 0
        for v in (self, *other):
            if isinstance(v, PackedInt):
                trace.read(v.name, words(v))
                size = max(size, words(v))
        name = rec.temp_name(op)
        n = words(value)
        trace.write(name, n)
        trace.compute(kind, max(size, n))
        rec.pos += 1
        return PackedInt(value, t, name)

    run.__name__ = run.__qualname__ = f"__{op}__"
    return run


def _escaping(method: Callable) -> Callable:
    """A way for the value to leave as a plain Python value: a read of its words, counted in escaped."""

    def run(self: PackedInt, *args: Any) -> Any:
        self.tracer.rec.escape(self.name, 1, words(self))
        return method(int.__int__(self), *(int.__int__(a) if isinstance(a, PackedInt) else a for a in args))

    run.__name__ = run.__qualname__ = method.__name__
    return run


for _op, _kind, _names in (
    ("xor", "xor", ("__xor__", "__rxor__")),
    ("and", "xor", ("__and__", "__rand__")),
    ("or", "xor", ("__or__", "__ror__")),
    ("invert", "xor", ("__invert__",)),
    ("lshift", "xor", ("__lshift__", "__rlshift__")),
    ("rshift", "xor", ("__rshift__", "__rrshift__")),
    ("neg", "add", ("__neg__",)),
    ("add", "add", ("__add__", "__radd__")),
    ("sub", "add", ("__sub__", "__rsub__")),
    ("mul", "mul", ("__mul__", "__rmul__")),
    ("floordiv", "div", ("__floordiv__", "__rfloordiv__")),
    ("mod", "div", ("__mod__", "__rmod__")),
):
    for _name in _names:
        setattr(PackedInt, _name, _operation(_op, _kind, getattr(int, _name)))
for _name in (
    *("__bool__", "__hash__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__index__", "__int__"),
    *("__float__", "__repr__", "__str__", "__format__", "bit_length", "bit_count", "to_bytes"),
):
    setattr(PackedInt, _name, _escaping(getattr(int, _name)))


def load_rows(t: NumpyTracer, rows: np.ndarray) -> Iterator[PackedInt]:
    """Each row of a traced (rows, W) uint64 array as a PackedInt living in the array's buffer (little-endian:
    bit j of the int is bit j % 64 of word j // 64). Loading moves nothing yet: the first operation on a row is
    the read of its words."""
    name = t.buffer(rows)
    data = t.unwrap(rows)
    for row in data:
        yield PackedInt(sum(int(w) << (WORD_BITS * j) for j, w in enumerate(row.tolist())), t, name)
