"""Automatic traces (tracker.source=auto): the trace recorded from the array operations a method's code really
does, instead of calls placed by hand beside them (docs/traces.md, "Automatic traces").

``NumpyTracer`` (numpy: an ndarray subclass over ``__array_ufunc__`` / ``__array_function__``, numpy's
creation and coercion functions covered while open) and ``TorchTracer`` (torch: a ``TorchDispatchMode`` that
sees every aten operator after autograd) feed the same ``sweep.trace.trace.Trace`` the hand-placed calls do, so
every tracker reads either source. TorchTracer is imported on first use: importing torch takes seconds.
"""

from __future__ import annotations

from typing import Any

from sweep.trace.auto.numpy_tracer import NumpyTracer
from sweep.trace.auto.traced_array import TracedArray

__all__ = ["NumpyTracer", "TorchTracer", "TracedArray"]


def __getattr__(name: str) -> Any:
    if name == "TorchTracer":
        from sweep.trace.auto.torch_tracer import TorchTracer  # noqa: PLC0415 - imports torch: seconds, on first use

        return TorchTracer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
