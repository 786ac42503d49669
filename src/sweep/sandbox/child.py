"""The sandboxed process: ``python -I -m sweep.sandbox.child '<limits as JSON>'``, started fresh by
sweep.sandbox.box (never forked from the process that records), answering the parent's requests one at a time.

Before any of the entrant's code runs it takes the protocol off stdin/stdout (the entrant's prints go to stderr,
which the parent keeps), asks to be killed with its parent, puts on its resource limits (address space, CPU
seconds, file size; soft = hard, so they cannot be raised back without privileges) and imports the project's
harnesses the parent names. Requests (sweep.sandbox.wire values): ``load`` (import the entrant's file or module,
find the function, check its signature), ``call`` (the function, or a harness around it, on the arguments; the
result returned, or kept as a handle), ``method`` (a method of a kept object). Whatever the entrant's code raises
(SystemExit and MemoryError too) is answered as one line and its traceback; the process then waits for the next
request, so only the parent ends it.
"""

from __future__ import annotations

import ctypes
import difflib
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import resource
import signal
import sys
import traceback
from typing import Any, Callable

import sweep.sandbox.wire as wire

PR_SET_PDEATHSIG = 1


def main() -> None:
    limits = json.loads(sys.argv[1])
    fd_in, fd_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)  # print() goes to the parent's log of this process, not into the protocol
    sys.stdout = sys.stderr
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # noqa: S110 - not Linux: the parent's kill at close is what ends it
        pass
    if limits.get("parent") and os.getppid() != limits["parent"]:
        os._exit(70)  # the parent died before the request to die with it (the fallback; bwrap's init is the parent)
    for name, key in (("RLIMIT_AS", "memory_bytes"), ("RLIMIT_CPU", "cpu_s"), ("RLIMIT_FSIZE", "file_bytes")):
        value = limits.get(key)
        if value:
            resource.setrlimit(getattr(resource, name), (int(value), int(value)))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    Child(fd_in, fd_out).serve()


class Child:
    def __init__(self, fd_in: int, fd_out: int) -> None:
        self.fd_in, self.fd_out = fd_in, fd_out
        self.fn: Callable[..., Any] | None = None
        self.kept: dict[int, Any] = {}

    def serve(self) -> None:
        while True:
            try:
                request = wire.receive(self.fd_in, most=wire.REQUEST_MESSAGE)
            except wire.Closed:
                os._exit(0)
            try:
                reply = self.handle(request)
            except BaseException as e:  # noqa: BLE001 - the entrant's code: whatever it raised is the answer
                reply = {"ok": False, "raised": one_line(e), "traceback": tb_text(e)}
            try:
                wire.send(self.fd_out, reply)
            except ValueError as e:
                wire.send(self.fd_out, {"ok": False, "garbage": str(e)})

    def handle(self, r: dict[str, Any]) -> dict[str, Any]:
        op = r["op"]
        if op == "load":
            return self.load(r)
        if op == "call":
            assert self.fn is not None, "call before load"
            if r.get("harness"):  # the project's code around the entrant's (sweep.methods.solver's trace)
                value = _attr(r["harness"])(self.fn, *r["args"], **r.get("kwargs", {}))
            else:
                value = self.fn(*r["args"], **r.get("kwargs", {}))
        elif op == "method":
            value = getattr(self.kept[r["handle"].id], r["name"])(*r["args"], **r.get("kwargs", {}))
        else:
            raise ValueError(f"unknown request {op!r}")
        if r.get("keep"):
            handle = wire.Handle(len(self.kept) + 1)
            self.kept[handle.id] = value
            return {"ok": True, "value": handle}
        return {"ok": True, "value": value}

    def load(self, r: dict[str, Any]) -> dict[str, Any]:
        for name in r.get("harnesses", ()):  # the project's own code, imported before any of the entrant's
            _attr(name)
        for p in r.get("sys_path", ()):
            sys.path.insert(0, p)
        path, name = r["path"], r["function"]
        try:
            module = _import_file(r["file"]) if r.get("file") else importlib.import_module(r["module"])
        except BaseException as e:  # noqa: BLE001 - the entrant's module failed as it loaded: one line, its cause
            verb = f"loading {os.path.basename(r['file'])}" if r.get("file") else f"importing {r['module']}"
            return {"ok": False, "config": f"{r['field']}={path}: {verb} raised {one_line(e)}"}
        fn = getattr(module, name, None)
        where = r["where"]
        if fn is None:
            known = sorted(k for k, v in vars(module).items() if inspect.isfunction(v) and not k.startswith("_"))
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else (f"; it has {', '.join(known)}" if known else "")
            return {"ok": False, "config": f"{r['field']}={path}: {where} has no function {name!r}{hint}"}
        if not callable(fn):
            return {"ok": False, "config": f"{r['field']}={path}: {name} is a {type(fn).__name__}, not a function"}
        if r.get("signature") is not None:
            args = r["signature"]
            try:
                inspect.signature(fn).bind(*args)
            except TypeError as e:
                return {
                    "ok": False,
                    "config": f"{r['field']}={path}: {name}{_signature(fn)} cannot be called as "
                    f"{name}({', '.join(args)}): {e}",
                }
            except ValueError:  # a builtin without a signature: it is called and its own error says why
                pass
        self.fn = fn
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            source = ""
        return {"ok": True, "value": {"source": source}}


def _attr(spec: str) -> Any:
    module, _, name = spec.rpartition(":")
    return getattr(importlib.import_module(module), name)


def _import_file(file: str) -> Any:
    name = "sweep_entrant_" + hashlib.sha256(file.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # what its own classes look up
    spec.loader.exec_module(module)
    return module


def _signature(fn: Any) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def one_line(e: BaseException) -> str:
    """The error as one line, at its place in the user's code: a SyntaxError at the file and line it names (its
    last frame is importlib's), another error at the deepest frame in a file not of Python's import machinery."""
    if isinstance(e, SyntaxError) and e.filename:
        return f"{type(e).__name__}: {e.msg} ({os.path.basename(e.filename)}, line {e.lineno})"
    frames = traceback.extract_tb(e.__traceback__)
    own = [f for f in frames if "importlib" not in f.filename and f.filename != __file__]
    # none of the user's (a file of null bytes: a SyntaxError with no file): no place, rather than importlib's line
    place = own[-1] if own else None
    at = f" ({os.path.basename(place.filename)}, line {place.lineno})" if place is not None else ""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}{at}" if text else f"{type(e).__name__}{at}"


def tb_text(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))[-8000:]


if __name__ == "__main__":
    main()
