"""Running a user's untrusted code in a process of its own (docs/challenge.md, "Isolation").

The process is started fresh (`python -I` by subprocess, never forked from the process that records), with an
environment of its own (no MLFLOW_*, no credentials, no store address), an empty temporary working directory,
and, where bubblewrap runs, no network, its own PID namespace that dies with it, and a read-only view of only the
interpreter, the project's code and the entrant's file (sweep.sandbox.isolation; `SWEEP_SANDBOX=process`: the
fallback without bubblewrap). It talks to the parent over pipes in JSON and `.npy` frames, never pickle
(sweep.sandbox.wire). Its memory, CPU time and file sizes are limited by the kernel; every wall clock and time
limit is the parent's.

    from sweep.sandbox import Sandbox, Limits, EntrantFailed, TimeLimit

    with Sandbox("my_model.py:build", field="method.path", signature=("text",), limits=Limits(load_s=10)) as box:
        # open: the module is loaded and its function checked in the child, within load_s: ConfigError naming
        # `field` (one line) if it raises, exits, hangs, lacks the function or cannot take the signature
        model = box.call(train_text, timeout=60, keep=True)  # the returned object stays in the child: a Handle
        box.method(model, "reset", timeout=1)
        probs = box.method(model, "predict", timeout=1)  # JSON-safe data back (dicts, lists, numbers, arrays)
        box.method(model, "observe", "a", timeout=1)
        box.wall_s, box.used  # the last call: seconds on the parent's clock, the kernel's counters (cpu_s, ...)
    # close (also on any failure): the whole process tree killed

- `call(*args, timeout, harness=None, keep=False)`: the function (or a project harness named at construction,
  `harnesses=("module:function",)`, called as harness(fn, *args) in the child) on plain inputs: numpy arrays,
  strings, numbers, lists, dicts. With `keep`, the result stays in the child and a `Handle` comes back.
- `method(handle, name, *args, timeout)`: one round trip to a kept object's method.
- A call that raises, exits (sys.exit, os._exit), crashes, runs out of memory, hangs past its timeout or answers
  something that is not an answer raises `EntrantFailed` (`TimeLimit` for time), one line; the process is then
  gone (except for a raise: the process lives on and may be called again).
- `box.source`: the entrant's module's text, as loaded; `box.how`: bwrap or process.
"""

from sweep.sandbox.box import EntrantFailed, Limits, Sandbox, TimeLimit
from sweep.sandbox.wire import Handle

__all__ = ["EntrantFailed", "Handle", "Limits", "Sandbox", "TimeLimit"]
