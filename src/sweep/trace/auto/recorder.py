"""What both automatic tracers share: buffer names, the position counter, and the count of escaped values.

A buffer is a block of memory (a numpy array's owner, a torch storage). A buffer the caller named keeps that
name; any other buffer is named by the operation that made it and that operation's position in the step
(``matmul#3``: the fourth operation since the last ``end_step``), so the same code run again makes the same
names and its steps intern as one template (sweep.trace.trace). Two live buffers never share a name (a buffer
whose position name is still taken by a live one gets a ``'k`` suffix): the trackers tell buffers apart by name.
"""

from __future__ import annotations

import weakref
from functools import partial
from typing import Any, Hashable

from sweep.trace.trace import Trace


class Recorder:
    """Names buffers and writes events into ``trace``; ``escaped`` counts the elements that left the arrays as
    Python values (``.item()``, ``float()``, ``bool()``, ``tolist()``, ...)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.escaped = 0
        self.pos = 0  # operations since the last end_step: the position in a temporary's name
        self._names: dict[Hashable, str] = {}  # live buffer key -> name
        self._keys: dict[str, Hashable] = {}  # name -> live buffer key
        self._refs: dict[int, weakref.ref] = {}  # id of a tracked memory object -> weak reference to it

    def name_of(self, key: Hashable) -> str | None:
        return self._names.get(key)

    def register(self, key: Hashable, name: str) -> str:
        """Give the buffer ``key`` the name ``name`` (or ``name'k`` where a live buffer holds it); returns it."""
        old = self._names.get(key)
        if old is not None:
            del self._keys[old]
        if name in self._keys:
            k = 1
            while f"{name}'{k}" in self._keys:
                k += 1
            name = f"{name}'{k}"
        self._names[key] = name
        self._keys[name] = key
        return name

    def track(self, memory: Any, name: str) -> str:
        """Name the buffer whose memory is the object ``memory`` (a numpy array's owner, a torch storage), keyed
        by its id while it lives: the name is forgotten when it dies, as its id may then be another's."""
        key = id(memory)
        name = self.register(key, name)
        if key not in self._refs:
            self._refs[key] = weakref.ref(memory, partial(self._gone, key))
        return name

    def rename(self, memory: Any, name: str) -> None:
        """The buffer of ``memory`` takes the name ``name`` from whichever buffer holds it (that one is no
        longer the name's: a new weight matrix replacing the old), in the events of the open step too."""
        old = self._names.get(id(memory))
        holder = self._keys.get(name)
        if holder is not None and holder != id(memory):
            self.forget(holder)
        self.track(memory, name)
        if old is not None and old != name:
            self.trace.rename_open(old, name)

    def _gone(self, key: int, ref: weakref.ref) -> None:
        if self._refs.get(key) is ref:
            del self._refs[key]
            self.forget(key)

    def forget(self, key: Hashable) -> None:
        """The buffer ``key`` is gone (its memory may be reused by another)."""
        name = self._names.pop(key, None)
        if name is not None and self._keys.get(name) == key:
            del self._keys[name]

    def temp_name(self, op: str, j: int = 0, role: str = "") -> str:
        """The name of output ``j`` of the operation now at position ``self.pos`` (``matmul#3``, ``divmod#3.1``),
        or of its argument ``j`` in a ``role`` (``maximum#3.in1``: an input the trace had not seen)."""
        return f"{op}#{self.pos}.{role}{j}" if role else f"{op}#{self.pos}.{j}" if j else f"{op}#{self.pos}"

    def escape(self, name: str, count: int, read: int | None = None) -> None:
        """``count`` elements of buffer ``name`` left the arrays as Python values: a read (of ``read`` elements,
        default ``count``), and counted in ``escaped`` (the tracer's and the trace's own, Trace.escaped)."""
        self.trace.read(name, count if read is None else read)
        self.escaped_values(count)

    def escaped_values(self, count: int) -> None:
        """``count`` values left the arrays (their reads recorded by the caller)."""
        self.escaped += count
        self.trace.escaped += count

    def end_step(self) -> None:
        """Close one step (Trace.end_step) and start naming temporaries from position 0 again, so that the next
        step, running the same code, names its buffers as this one did."""
        self.trace.end_step()
        self.pos = 0
