"""TracedArray: the ndarray subclass through which a NumpyTracer sees numpy operations (sweep.trace.auto.numpy_tracer).

numpy routes every ufunc (``+``, ``@``, ``np.maximum``, in-place ``-=``, ``.sum()``, ``.any()``) of a subclass
through its ``__array_ufunc__``, and every array function (``np.where``, ``np.concatenate``) through its
``__array_function__``; indexing, item assignment and the ndarray methods that bypass both (``.dot``, ``.take``,
``.astype``, ...) are overridden here. Each computes on plain views and hands the operation to the open tracer to
record; with no tracer open (or while the tracer runs numpy itself) a TracedArray computes as an ndarray and its
results are plain. A value leaving as a Python value (``.item()``, ``float()``, ``bool()``, ``tolist()``,
``tobytes()``, iteration, printing) is reported to the tracer as an escape.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

import numpy as np

_ndarray = np.ndarray
_generic = np.generic
_view = _ndarray.view  # ndarray's own: TracedArray.view keeps a view traced, the tracer unwraps with this
_base = _ndarray.base.__get__  # ndarray's own: TracedArray.base keeps the base traced
# the open tracers, innermost last: one stack for every thread, so that a thread a traced function starts is
# traced too (its operations go into the same trace)
_open: list[Any] = []
# per thread: it is running numpy itself (what numpy does inside is part of the operation being recorded); not an
# attribute of the tracer, which the traced code is handed nothing of
_busy = threading.local()


def active() -> Any:
    """The innermost open tracer, or None (none open, or this thread is running numpy itself)."""
    if not _open or getattr(_busy, "on", False):
        return None
    return _open[-1]


def owner(a: np.ndarray) -> np.ndarray:
    """The array that owns ``a``'s memory (the end of its .base chain): the identity of its buffer."""
    b = _base(a)
    while isinstance(b, _ndarray):
        a, b = b, _base(b)
    return a


def plain(x: Any) -> Any:
    """``x`` with every TracedArray replaced by a plain ndarray view of it (tuples, lists and dicts too)."""
    if isinstance(x, TracedArray):
        return _view(x, _ndarray)
    cls = x.__class__
    if cls is tuple or cls is list:
        return cls(plain(v) for v in x)
    if cls is dict:
        return {k: plain(v) for k, v in x.items()}
    return x


def arrays(x: Any) -> Iterator[np.ndarray]:
    """Every ndarray in ``x`` (nested tuples, lists and dict values)."""
    if isinstance(x, _ndarray):
        yield x
    elif x.__class__ in (tuple, list):
        for v in x:
            yield from arrays(v)
    elif x.__class__ is dict:
        for v in x.values():
            yield from arrays(v)


class TracedArray(np.ndarray):
    """An ndarray whose operations are recorded by the open NumpyTracer (none open: it computes as an ndarray and
    its results are plain ndarrays)."""

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        t = active()
        if t is None:
            return getattr(ufunc, method)(*plain(inputs), **plain(kwargs))
        _busy.on = True
        try:
            res = getattr(ufunc, method)(*plain(inputs), **plain(kwargs))
        finally:
            _busy.on = False
        return t.ufunc(ufunc, method, inputs, kwargs, res)

    def __array_function__(self, func: Callable, types: tuple, args: tuple, kwargs: dict) -> Any:
        t = active()
        if t is None:
            return func(*plain(args), **plain(kwargs))
        _busy.on = True
        try:
            res = func(*plain(args), **plain(kwargs))
        finally:
            _busy.on = False
        return t.function(func.__name__, args, kwargs, res)

    def __array_finalize__(self, obj: Any) -> None:
        # Every new TracedArray passes here. One that holds new memory made from a traced array by an ndarray
        # method that bypasses the overrides below is a copy: a read of the source and a write of the copy.
        if obj.__class__ is TracedArray:
            t = active()
            if t is not None and owner(self) is not owner(obj):
                t.function("copy", (obj,), {}, _view(self, _ndarray))

    def __array_wrap__(self, arr: Any, context: Any = None, return_scalar: bool = False) -> Any:
        # numpy code that took this array's data through an internal asarray and computed on it unseen hands the
        # result back here (numpy.linalg's _makearray): at least a read of this array and a write of the result
        t = active()
        if t is not None:
            _busy.on = True
        try:
            res = _ndarray.__array_wrap__(self, arr, context, return_scalar)
        finally:
            if t is not None:
                _busy.on = False
        if t is None or not isinstance(arr, _ndarray) or owner(arr) is owner(self):
            return res
        t.function("wrap", (self,), {}, arr)
        return res

    def __getitem__(self, key: Any) -> Any:
        t = active()
        p, k = _view(self, _ndarray), plain(key)
        res = p[k]
        if t is None:
            return res
        if not isinstance(res, _ndarray):
            # one element: returned as a 0-d view, so that its later use (or escape) is a read of this buffer
            res = p[(*k, Ellipsis) if k.__class__ is tuple else (k, Ellipsis)]
        return t.function("getitem", (self, key), {}, res)

    def __setitem__(self, key: Any, value: Any) -> None:
        t = active()
        p, k = _view(self, _ndarray), plain(key)
        if t is None:
            p[k] = plain(value)
            return
        _busy.on = True
        try:
            p[k] = plain(value)
            sel = p[k]
        finally:
            _busy.on = False
        t.setitem(self, key, value, sel.size if isinstance(sel, _ndarray) else 1)

    # -- ways to the same memory as a plain ndarray, which the trace would not see: kept traced while one is open --
    def view(self, *args: Any, **kwargs: Any) -> Any:
        res = _view(self, *args, **kwargs)
        if isinstance(res, _ndarray) and not isinstance(res, TracedArray) and active() is not None:
            return _view(res, TracedArray)  # x.view(np.ndarray): the same buffer, still traced
        return res

    @property
    def base(self) -> Any:  # type: ignore[override]
        b = _base(self)
        if isinstance(b, _ndarray) and not isinstance(b, TracedArray) and active() is not None:
            return _view(b, TracedArray)  # x.base: the buffer it views, still traced
        return b

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        res = _ndarray.__array__(self, *args, **kwargs)
        if isinstance(res, _ndarray) and not isinstance(res, TracedArray) and active() is not None:
            return _view(res, TracedArray)
        return res

    # -- values leaving the arrays as Python values: reads, counted in t.escaped --
    def item(self, *args: Any) -> Any:
        return _escaping(self, 1, _ndarray.item, args)

    def tolist(self) -> Any:
        return _escaping(self, self.size, _ndarray.tolist)

    def tobytes(self, order: str = "C") -> bytes:
        return _escaping(self, self.size, _ndarray.tobytes, (order,))

    def __float__(self) -> float:
        return _escaping(self, 1, _ndarray.__float__)

    def __int__(self) -> int:
        return _escaping(self, 1, _ndarray.__int__)

    def __index__(self) -> int:
        return _escaping(self, 1, _ndarray.__index__)

    def __complex__(self) -> complex:
        return _escaping(self, 1, _ndarray.__complex__)

    def __bool__(self) -> bool:
        return _escaping(self, 1, _ndarray.__bool__)

    def __repr__(self) -> str:
        return _escaping(self, self.size, _ndarray.__repr__)

    def __str__(self) -> str:
        return _escaping(self, self.size, _ndarray.__str__)

    def __format__(self, spec: str) -> str:
        return _escaping(self, self.size, _ndarray.__format__, (spec,))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return _escaping(self, self.size, _ndarray.__reduce_ex__, (protocol,))

    def __iter__(self) -> Iterator[Any]:
        if self.ndim > 1:
            return (self[i] for i in range(len(self)))  # views: reads when used
        return _escaping(self, self.size, _ndarray.__iter__)


def _escaping(a: TracedArray, count: int, method: Callable, args: tuple = ()) -> Any:
    t = active()
    if t is not None:
        t.escape(a, count)
    return method(_view(a, _ndarray), *args)


def _method(name: str, writes_self: bool = False) -> Callable:
    """An ndarray method that bypasses __array_ufunc__ and __array_function__, recorded like an array function
    named ``name`` (``writes_self``: it changes the array in place)."""
    base = getattr(_ndarray, name)

    def method(self: TracedArray, *args: Any, **kwargs: Any) -> Any:
        t = active()
        if t is None:
            return base(_view(self, _ndarray), *plain(args), **plain(kwargs))
        _busy.on = True
        try:
            res = base(_view(self, _ndarray), *plain(args), **plain(kwargs))
        finally:
            _busy.on = False
        return t.function(name, (self, *args), kwargs, res, written=(self,) if writes_self else ())

    method.__name__ = method.__qualname__ = name
    method.__doc__ = base.__doc__
    return method


for _name in (
    *("dot", "take", "argsort", "argmax", "argmin", "nonzero", "searchsorted", "argpartition", "repeat"),
    *("compress", "choose", "trace", "copy", "astype", "flatten", "ravel", "reshape", "squeeze", "transpose"),
    *("swapaxes", "diagonal", "round", "clip", "cumsum", "cumprod", "max", "min", "sum", "prod", "mean"),
    *("std", "var", "any", "all", "conj"),
):  # not .view: it is how the tracer itself unwraps (and a view moves nothing)
    setattr(TracedArray, _name, _method(_name))
for _name in ("sort", "partition", "fill", "put", "resize"):
    setattr(TracedArray, _name, _method(_name, writes_self=True))


def traced(x: Any) -> Any:
    """``x`` with every plain ndarray as a TracedArray view of it (tuples and lists too)."""
    if isinstance(x, _ndarray) and not isinstance(x, TracedArray):
        return _view(x, TracedArray)
    if x.__class__ in (tuple, list):
        return x.__class__(traced(v) for v in x)
    return x
