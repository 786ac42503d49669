"""The solver's harness in its sandbox (sweep.methods.solver runs it there, around the user's `solve`): the
automatic numpy trace of the solve, sent back to the parent as its stored text, with the answer.

It is imported in the child before the user's module. While the solve runs, starting a process is refused (a
forked process would compute where no trace sees it): os.fork, the spawn calls and subprocess raise
PermissionError. A thread the solve starts is traced (one stack of tracers for every thread). What the parent
checks of what comes back, and what remains unseen: sweep.methods.solver, docs/challenge.md.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from sweep.sandbox import wire
from sweep.trace import stored
from sweep.trace.auto import NumpyTracer  # noqa: F401 - imported here, before the clock, not at the first trace
from sweep.trace.source import Source, recording
from sweep.trace.trace import NULL_TRACE, Trace

PROCESS_CALLS = ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve", "execvp", "execvpe")


def solve(fn: Callable[..., Any], x: Any, y: Any, n_bits: int, k_sparse: int, traced: bool) -> dict[str, Any]:
    """`fn(x, y, n_bits, k_sparse)` under the trace (`traced`): {answer, trace (stored text or None), escaped}."""
    _refuse_processes()
    x, y = x.copy(), y.copy()  # arrays of their own (the wire's are read-only views of its bytes): its to write
    trace = Trace() if traced else NULL_TRACE
    with recording(trace, Source.AUTO, "numpy", loaded={"x": x, "y": y}) as rec:
        answer = rec.unwrap(fn(rec["x"], rec["y"], n_bits, k_sparse))
    try:
        wire.encode(answer)
    except ValueError:  # not data: its text, which the parent's check of the answer refuses with the reason
        answer = repr(answer)[:200]
    return {"answer": answer, "trace": stored.dumps(trace) if traced else None, "escaped": trace.escaped}


def _refuse_processes() -> None:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError("a solver may not start processes (docs/challenge.md)")

    for name in PROCESS_CALLS:
        if hasattr(os, name):
            setattr(os, name, refused)
    try:
        import _posixsubprocess  # noqa: PLC0415 - subprocess's own fork

        _posixsubprocess.fork_exec = refused
    except ImportError:
        pass
