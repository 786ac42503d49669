"""NumpyTracer: the trace of numpy code, recorded from the arrays' own operations (tracker.source=auto).

An array the caller names (``t.wrap(a, "W1")``) becomes a ``TracedArray``, an ndarray subclass that sees every
operation done with it: ufuncs (``+``, ``@``, ``np.maximum``, in-place ``-=``, ``.sum()``, ``.any()``: numpy
routes them through ``__array_ufunc__``), array functions (``np.where``, ``np.concatenate``: ``__array_function__``),
indexing and item assignment, and the ndarray methods that bypass both (``.dot``, ``.take``, ``.astype``, ...).
Each operation emits reads of its array inputs, writes of its outputs (sizes in elements) and its arithmetic as
``Trace.compute`` counts (sweep.trace.auto.kinds); its results are TracedArrays, so whatever is computed from a
named input is traced too. A view (``a.T``, ``a[2:5]``, ``a.reshape``) moves nothing: it emits no event and is
the buffer it views (buffers are keyed by the memory's owner, see below).

Nothing escapes while the ``with`` block is open:
- numpy's creation and coercion functions (``np.asarray``, ``np.array``, ``np.zeros``, ...) are replaced, so
  ``np.asarray(traced)`` stays traced and a new array is a write;
- an array the trace has never seen (made before the block, or by a library) is named where an operation first
  reads it, and written there once, so every read follows a write;
- a value that leaves the arrays as a Python value (``.item()``, ``float()``, ``int()``, ``bool()``, ``tolist()``,
  ``tobytes()``, iterating a 1-d array, printing) is a read, and its elements are counted in ``t.escaped``;
- a ndarray method not listed here that makes new memory from a traced array is still a read of the source and
  a write of the result (``__array_finalize__`` sees every new TracedArray).

Buffers are keyed by the memory's owner (the array at the end of the ``.base`` chain), not by offset: every view
of one array is that array's buffer, and an event's size is the number of elements the view holds. The trace's
events have no offsets (an event touches its buffer's elements 0..size-1), so a tile or a column of a named
array is counted as that many elements of it.
"""

from __future__ import annotations

import sys
import threading
from math import isqrt
from types import TracebackType
from typing import Any, Callable

import numpy as np

from sweep.trace.auto.kinds import arithmetic
from sweep.trace.auto.recorder import Recorder
from sweep.trace.auto.traced_array import (
    TracedArray,
    _busy,
    _generic,
    _ndarray,
    _open,
    active,
    arrays,
    owner,
    plain,
    traced,
)
from sweep.trace.trace import Trace

# functions that read only metadata (shapes, dtypes, addresses): no events
NO_DATA = frozenset(
    (
        *("shape", "ndim", "size", "result_type", "may_share_memory", "shares_memory", "iscomplexobj"),
        *("isrealobj", "broadcast_shapes", "can_cast", "min_scalar_type", "iscomplex", "isreal"),
    )
)
# functions that write their first argument in place
WRITES_FIRST = frozenset(("copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"))
# operations that write an array without reading what was in it
OVERWRITES = WRITES_FIRST | {"fill", "put", "resize"}
# operations that gather elements of their first argument: it is read as many elements as they return
GATHERS = frozenset(("getitem", "take", "take_along_axis", "compress", "choose", "repeat"))
# functions whose array argument gives only a shape
SHAPE_ONLY = frozenset(("zeros_like", "ones_like", "empty_like", "full_like"))
# numpy.linalg: multiply-adds of an (n, n) system (LU, Cholesky, inversion) with k right-hand sides
LINALG: dict[str, Callable[[int, int], int]] = {
    "solve": lambda n, k: n**3 // 3 + n * n * k,
    "inv": lambda n, k: n**3,
    "det": lambda n, k: n**3 // 3,
    "slogdet": lambda n, k: n**3 // 3,
    "cholesky": lambda n, k: n**3 // 6,
    "lstsq": lambda n, k: n**3 + n * n * k,
    "qr": lambda n, k: 2 * n**3 // 3,
    "eigh": lambda n, k: 4 * n**3,
    "eig": lambda n, k: 10 * n**3,
    "svd": lambda n, k: 4 * n**3,
}


class NumpyTracer:
    """A context manager: while open, the operations of TracedArrays (see the module's docstring) are recorded
    into ``trace``; ``wrap`` names an input, ``escaped`` counts the elements that left the arrays as Python
    values, ``end_step`` closes one step (a template of the trace), ``unwrap`` gives plain ndarrays back."""

    def __init__(self, trace: Trace) -> None:
        self.rec = Recorder(trace)
        self.trace = trace

    @property
    def escaped(self) -> int:
        return self.rec.escaped

    def __enter__(self) -> "NumpyTracer":
        _open.append(self)
        _patch()
        return self

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        _open.remove(self)
        _unpatch()

    def wrap(self, a: Any, name: str, write: bool = True) -> TracedArray:
        """``a`` as a TracedArray whose buffer (its memory's owner) is named ``name``; ``write``: emit the write
        that puts it in memory (an input of a step already in memory, such as a weight, is wrapped without)."""
        if not isinstance(a, _ndarray):
            a = _ORIG["asarray"](a)
        name = self._register(a, name)
        if write:
            self.trace.write(name, a.size)
        return a if isinstance(a, TracedArray) else a.view(TracedArray)

    def buffer(self, a: np.ndarray, op: str = "buffer", j: int = 0) -> str:
        """The name of ``a``'s buffer. Memory the trace has not seen (an input made outside it) is named as
        argument ``j`` of the operation ``op`` at this position and written here, where it is first used, so that
        every read follows a write."""
        name = self.rec.name_of(id(owner(a)))
        if name is None:
            name = self._register(a, self.rec.temp_name(op, j, "in"))
            self.trace.write(name, a.size)
        return name

    def rename(self, a: np.ndarray, name: str) -> None:
        """``a``'s buffer takes the name ``name`` (from the buffer that held it), in the open step's events too:
        a result that replaces a named input (a widened weight matrix) is named after the fact."""
        self.rec.rename(owner(a), name)

    def unwrap(self, x: Any) -> Any:
        """``x`` with every TracedArray replaced by a plain ndarray view (nested tuples, lists, dicts too)."""
        return plain(x)

    def end_step(self) -> None:
        """Close one step of the trace and name the next step's temporaries from position 0 again."""
        self.rec.end_step()

    # -- buffers --
    def _register(self, a: np.ndarray, name: str) -> str:
        return self.rec.track(owner(a), name)

    def _read(self, a: np.ndarray, op: str, j: int, count: int | None = None) -> None:
        """A read of ``count`` elements of ``a`` (default: all of them; more for a gather, Recorder.read)."""
        self.rec.read(self.buffer(a, op, j), a.size, a.size if count is None else count)

    def _written(self, a: np.ndarray, op: str, j: int) -> None:
        name = self.rec.name_of(id(owner(a)))
        if name is None:
            name = self._register(a, self.rec.temp_name(op, j, "out"))
        self.trace.write(name, a.size)

    def _result(self, res: Any, op: str, j: int, sources: set[int]) -> Any:
        """One result of an operation as a TracedArray: a view of an input (owner in ``sources``) as it is, new
        memory as a write of a new buffer; a Python value (bool, int, float) escapes."""
        if isinstance(res, _ndarray):
            o = owner(res)
            if id(o) not in sources:
                name = self._register(o, self.rec.temp_name(op, j))
                self.trace.write(name, res.size)
            return res.view(TracedArray)
        if isinstance(res, _generic):
            res = _ORIG["asarray"](res)
            name = self._register(res, self.rec.temp_name(op, j))
            self.trace.write(name, 1)
            return res.view(TracedArray)
        if res.__class__ in (bool, int, float, complex):
            self.rec.escaped_values(1)
        return res

    def escape(self, a: np.ndarray, count: int) -> None:
        """``count`` elements of ``a`` leave the arrays as Python values."""
        self.rec.escape(self.buffer(a, "escape"), count, a.size)

    # -- operations --
    def ufunc(self, ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict, res: Any) -> Any:
        op = ufunc.__name__
        ins = [a for a in inputs if isinstance(a, _ndarray)]
        where = kwargs.get("where")
        for j, a in enumerate(ins if not isinstance(where, _ndarray) else [*ins, where]):
            self._read(a, op, j)
        out = kwargs.get("out")
        if method == "at":  # ufunc.at(a, indices, b): a changed in place at the indices
            self._written(inputs[0], op, 0)
            n_out, ret = (inputs[2].size if len(inputs) > 2 and isinstance(inputs[2], _ndarray) else 1), res
        elif out is not None:
            outs = out if out.__class__ is tuple else (out,)
            for j, o in enumerate(outs):
                if o is not None:
                    self._written(o, op, j)
            n_out = sum(o.size for o in outs if o is not None)
            ret = outs[0] if len(outs) == 1 and ufunc.nout == 1 else outs
            if isinstance(ret, _ndarray) and not isinstance(ret, TracedArray):
                ret = ret.view(TracedArray)
        else:
            sources = {id(owner(a)) for a in ins}
            if res.__class__ is tuple:
                ret = tuple(self._result(r, op, j, sources) for j, r in enumerate(res))
            else:
                ret = self._result(res, op, 0, sources)
            n_out = sum(np.size(r) for r in (res if res.__class__ is tuple else (res,)))
        if op in ("matmul", "vecdot", "matvec", "vecmat") and ins:
            self.trace.compute("fma", n_out * ins[0].shape[-1])
        else:
            n_in = max((a.size for a in ins), default=1)
            if method in ("reduce", "accumulate", "reduceat"):
                n_out = n_in  # a reduction counts one operation per input element
            counted = arithmetic(op, n_in, n_out)
            if counted is not None:
                self.trace.compute(*counted)
        self.rec.pos += 1
        return ret

    def function(self, op: str, args: tuple, kwargs: dict, res: Any, written: tuple = ()) -> Any:
        """An array function (or an ndarray method recorded as one) with arguments ``args, kwargs`` and result
        ``res`` (plain arrays): reads of its array arguments, writes of the arguments it changes in place and of
        its results in new memory, its arithmetic."""
        if op in NO_DATA:
            return res
        out = kwargs.get("out")
        if op in WRITES_FIRST:
            written, args = (*written, args[0]), args[1:]
        ins = [] if op in SHAPE_ONLY else list(arrays((args, {k: v for k, v in kwargs.items() if k != "out"})))
        written = (*written, *(arrays(out) if out is not None else ()))
        sources = {id(owner(a)) for a in ins}
        results = res if res.__class__ in (tuple, list) else (res,)
        new = [r for r in results if not (isinstance(r, _ndarray) and id(owner(r)) in sources)]
        if not new and not written:  # a view of its input (reshape, transpose, basic indexing): moves nothing
            return traced(res)
        if op in OVERWRITES:
            ins = [a for a in ins if not any(a is w for w in written)]
        for j, a in enumerate(ins):
            gathered = j == 0 and op in GATHERS
            self._read(a, op, j, sum(np.size(r) for r in results) if gathered else a.size)
        for j, a in enumerate(written):
            self._written(a, op, j)
        if res.__class__ is tuple:
            ret: Any = tuple(self._result(r, op, j, sources) for j, r in enumerate(res))
        elif res.__class__ is list:
            ret = [self._result(r, op, j, sources) for j, r in enumerate(res)]
        else:
            ret = self._result(res, op, 0, sources)
        self._count(op, args, ins, results, written)
        self.rec.pos += 1
        return ret if out is None else traced(out)

    def setitem(self, a: "TracedArray", key: Any, value: Any, count: int) -> None:
        """``a[key] = value``: reads of the value and of any index arrays, a write of ``count`` elements of a."""
        for j, v in enumerate(arrays((key, value))):
            self._read(v, "setitem", j)
        name = self.rec.name_of(id(owner(a))) or self._register(a, self.rec.temp_name("setitem", 0, "out"))
        self.trace.write(name, count)
        self.rec.pos += 1

    def _count(self, op: str, args: tuple, ins: list, results: tuple, written: tuple) -> None:
        n_out = sum(np.size(r) for r in results if isinstance(r, (_ndarray, _generic))) + sum(w.size for w in written)
        if op in ("dot", "inner", "tensordot", "vdot") and len(ins) >= 2:
            a, b = ins[0].size, ins[1].size
            n = max(n_out, 1)
            self.trace.compute("fma", n * max(1, isqrt(a * b // n)) if op != "vdot" else a)
        elif op == "einsum" and args and isinstance(args[0], str) and "..." not in args[0]:
            dims: dict[str, int] = {}
            for labels, a in zip(args[0].split("->")[0].split(","), ins):
                dims.update(zip(labels.strip(), a.shape))
            self.trace.compute("fma", int(np.prod(list(dims.values()), dtype=np.int64)))
        elif op == "outer":
            self.trace.compute("mul", n_out)
        elif op in LINALG and ins:
            n = ins[0].shape[-1]
            k = ins[1].shape[-1] if len(ins) > 1 and ins[1].ndim > 1 else 1
            self.trace.compute("fma", LINALG[op](n, k))
        else:
            counted = arithmetic(op, max((a.size for a in ins), default=1), n_out)
            if counted is not None:
                self.trace.compute(*counted)


# -- numpy's creation and coercion functions, replaced while a tracer is open --
COERCE = ("asarray", "array", "asanyarray", "ascontiguousarray", "asfortranarray", "frombuffer", "fromiter")
CREATE = ("zeros", "ones", "empty", "full", "arange", "eye", "identity")
# functions of other libraries that compute on numpy's internals, where an internal asarray strips the subclass
# (array_api_compat's linalg.solve calls numpy's solve gufunc on plain copies): each recorded as one operation of
# all its array arguments, like a numpy function through __array_function__
LIBRARY: dict[str, tuple[str, ...]] = {"array_api_compat.numpy.linalg": ("solve",)}
_ORIG: dict[str, Callable] = {name: getattr(np, name) for name in COERCE + CREATE}
_patched: list[Any] = [0, []]  # open tracers (all threads), and the (module, name, original) replaced
_patch_lock = threading.Lock()


def _recorded(orig: Callable, name: str) -> Callable:
    """``orig`` computing on plain arrays, recorded as the operation ``name`` of its arguments and results: a
    coercion that returns its argument's memory is a view (no event), a new array is a write."""

    def run(*args: Any, **kwargs: Any) -> Any:
        t = active()
        if t is None:
            return orig(*args, **kwargs)
        _busy.on = True
        try:
            res = orig(*plain(args), **plain(kwargs))
        finally:
            _busy.on = False
        return t.function(name, args, kwargs, res)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = orig.__doc__
    return run


def _creation(name: str) -> Callable:
    orig = _ORIG[name]

    def create(*args: Any, **kwargs: Any) -> Any:
        t = active()
        res = orig(*args, **kwargs)
        if t is None:
            return res
        tracer_name = t._register(res, t.rec.temp_name(name))
        if name != "empty":  # np.empty leaves the memory as it was: its first write is the operation that fills it
            t.trace.write(tracer_name, res.size)
        t.rec.pos += 1
        return res.view(TracedArray)

    create.__name__ = create.__qualname__ = name
    create.__doc__ = orig.__doc__
    return create


_REPLACEMENTS = {**{n: _recorded(_ORIG[n], n) for n in COERCE}, **{n: _creation(n) for n in CREATE}}


def _patch() -> None:
    with _patch_lock:
        _patched[0] += 1
        if _patched[0] > 1:
            return
        targets = [(np, name, fn) for name, fn in _REPLACEMENTS.items()]
        for module_name, names in LIBRARY.items():
            module = sys.modules.get(module_name)  # a library not imported yet is not in use
            targets += [(module, n, _recorded(getattr(module, n), n)) for n in names] if module else []
        for module, name, fn in targets:
            _patched[1].append((module, name, getattr(module, name)))
            setattr(module, name, fn)


def _unpatch() -> None:
    with _patch_lock:
        _patched[0] -= 1
        if _patched[0] == 0:
            for module, name, fn in reversed(_patched[1]):
                setattr(module, name, fn)
            _patched[1].clear()
