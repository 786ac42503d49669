"""Where a run's trace comes from (tracker.source): the calls placed by hand beside the arithmetic (``hand``, the
published protocols' source), or the array operations the code really does, recorded by a tracer (``auto``,
sweep.trace.auto).

A method marks each piece of code it traces with ``recording``: under ``hand`` the piece runs as written and its
``trace.read`` / ``trace.write`` / ``trace.compute`` calls are the trace; under ``auto`` those calls go nowhere
(NULL_TRACE) and a tracer records the piece's numpy or torch operations into the same Trace instead, with the
arrays the piece starts from named as the hand trace names them (``W1``, ``x``, ...). So one method's code gives
both sources, and both feed every tracker.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from enum import Enum
from typing import Any, ContextManager, Iterator, Mapping

from sweep.trace.trace import NULL_TRACE, Trace


class Source(str, Enum):
    HAND = "hand"  # trace.read/write/compute calls placed beside the arithmetic (docs/traces.md)
    AUTO = "auto"  # every array operation, recorded by sweep.trace.auto's tracers


# tracker.source's default: the source the method's class declares as ``trace_source``. A method with a published
# trace protocol (the SGD family's step, forward-forward's) keeps its hand trace; the exact solvers, whose hand
# traces miss real reads, default to auto (docs/traces.md, "Hand and automatic traces"). A run records the source
# it used as a tag (TRACE_SOURCE_TAG).
METHOD = "method"
SOURCES: tuple[str, ...] = (METHOD, *(s.value for s in Source))  # tracker.source's values


def resolve(value: str, own: str) -> Source:
    """The source a job traces from: ``value`` (tracker.source), or the method's own, ``own`` (its class's
    ``trace_source``, sweep.methods.base.MethodBase), where it says ``method``."""
    return Source(own if value == METHOD else value)


@dataclass
class Recording:
    """One traced piece of code: ``trace`` takes its hand calls (NULL_TRACE under auto), ``arrays`` are its named
    inputs to compute with (under auto: traced), ``tracer`` records it under auto (None under hand)."""

    trace: Trace
    arrays: dict[str, Any]
    tracer: Any = None

    def __getitem__(self, name: str) -> Any:
        return self.arrays[name]

    def unwrap(self, x: Any) -> Any:
        """``x`` as plain arrays (a numpy tracer's TracedArrays leave the recording as ndarrays)."""
        return x if self.tracer is None or not hasattr(self.tracer, "unwrap") else self.tracer.unwrap(x)

    def load(self, name: str, array: Any) -> Any:
        """``array`` put in memory now under ``name`` (under auto: named and written, and returned traced)."""
        if self.tracer is None:
            return array
        if hasattr(self.tracer, "wrap"):
            return self.tracer.wrap(array, name)
        self.tracer.name(array, name)
        return array

    def rename(self, array: Any, name: str) -> None:
        """Under auto, ``array``'s buffer takes the name ``name`` (a result replacing a named input); under hand
        the hand calls name it already."""
        if self.tracer is not None:
            self.tracer.rename(array, name)

    @property
    def escaped(self) -> int:
        """Elements that left the arrays as Python values (0 under hand, which does not look)."""
        return 0 if self.tracer is None else self.tracer.escaped


def recording(
    trace: Trace,
    source: "Source | str",
    backend: str,
    held: Mapping[str, Any] = {},
    loaded: Mapping[str, Any] = {},
) -> ContextManager[Recording]:
    """Trace the code run in the ``with`` block into ``trace`` from ``source``, on the array library ``backend``
    (numpy | torch). ``held``: arrays already in memory (a step's weights), named; ``loaded``: arrays put in memory
    now (a batch), named and written in order. A trace that is off (NullTrace) records nothing either way, and
    costs the untraced solve no more than a nullcontext."""
    if not trace.enabled or source == Source.HAND:
        return nullcontext(Recording(trace, {**held, **loaded}))
    return _auto(trace, backend, held, loaded)


@contextmanager
def _auto(trace: Trace, backend: str, held: Mapping[str, Any], loaded: Mapping[str, Any]) -> Iterator[Recording]:
    if backend == "numpy":
        from sweep.trace.auto import NumpyTracer  # noqa: PLC0415 - the tracer only where a run asks for it

        with NumpyTracer(trace) as t:
            arrays = {k: t.wrap(v, k, write=False) for k, v in held.items()}
            arrays.update({k: t.wrap(v, k) for k, v in loaded.items()})
            yield Recording(NULL_TRACE, arrays, t)
        return
    from sweep.trace.auto import TorchTracer  # noqa: PLC0415 - imports torch: only for device.backend=torch

    with TorchTracer(trace, held, write=False) as t:
        for k, v in loaded.items():
            t.name(v, k)
        yield Recording(NULL_TRACE, {**held, **loaded}, t)
