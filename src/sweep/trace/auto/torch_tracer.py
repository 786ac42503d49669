"""TorchTracer: the trace of torch code, recorded from the aten operators it runs (tracker.source=auto).

A ``TorchDispatchMode``: while open, every aten operator reaches ``__torch_dispatch__`` after autograd, so the
forward pass, the backward pass the autograd engine runs, and the optimizer (its foreach and fused kernels too)
are all seen, each operator once, with its real inputs and outputs. Each emits reads of its tensor inputs,
writes of its outputs (sizes in elements) and its arithmetic (sweep.trace.auto.kinds).

- Buffers are storages: every view of one storage (``t()``, ``view``, ``expand``, slices) is one buffer, and a
  view operator moves nothing, so it emits no event. An event's size is the number of elements of the tensor
  the operator touched (the trace's events have no offsets; see sweep.trace.auto.numpy_tracer).
- Which inputs an operator writes comes from its schema's alias annotations (``Tensor(a!)``): an in-place
  operator (``add_``) reads and writes its ``self``; an ``out=`` argument and the target of an operator that
  overwrites (``copy_``, ``fill_``, ``zero_``, random fills) are written only.
- Names: the tensors given in ``names`` keep their names (their storages do: a parameter's views too); a buffer
  made by an operator is named by the operator and its position in the step (``mm#4``), so a step run again
  names its buffers the same way and the steps intern as templates (sweep.trace.trace).
- A value that leaves the tensors: ``.item()`` / ``float()`` / ``bool()`` (aten's ``_local_scalar_dense``),
  ``.tolist()``, ``.numpy()`` and ``np.asarray(tensor)`` (replaced while open), a copy from a device to the CPU
  (``.cpu()`` of a CUDA tensor): a read, its elements counted in ``escaped``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from sweep.trace.auto.kinds import KIND, arithmetic
from sweep.trace.auto.recorder import Recorder
from sweep.trace.trace import Trace

# operators whose mutable argument is written without being read
OVERWRITES = frozenset(
    (
        *("copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_"),
        *("geometric_", "cauchy_", "log_normal_", "set_", "resize_", "index_put_", "_index_put_impl_"),
        *("_foreach_copy_", "_foreach_zero_", "masked_scatter_", "index_copy_", "scatter_"),
    )
)
# operators that move nothing, run no arithmetic and are not the algorithm's (profiler markers, metadata)
IGNORED = frozenset(("_record_function_enter_new", "_record_function_exit", "sym_size", "sym_stride", "sym_numel"))
# operators that allocate without writing (the operator that fills the memory writes it)
EMPTY = frozenset(("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"))
_state = threading.local()  # .stack: the open TorchTracers of this thread


def _active() -> "TorchTracer | None":
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


def _storage(t: torch.Tensor) -> Any:
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # a tensor without a storage (sparse, nested): itself
        return t


def _kind_name(op: str) -> str:
    """The operation an operator name stands for: ``_foreach_add_`` and ``add_`` are ``add``."""
    if op.startswith("_foreach_"):
        op = op[len("_foreach_") :]
    return op[:-1] if op.endswith("_") and not op.startswith("_") else op


def _tensors(x: Any) -> list[torch.Tensor]:
    return [v for v in tree_flatten(x)[0] if isinstance(v, torch.Tensor)]


class TorchTracer(TorchDispatchMode):
    """Records every aten operator run while open into ``trace`` (see the module's docstring). ``names`` maps a
    name to a tensor (a parameter, an input batch); ``write``: emit the writes that put them in memory when the
    tracer opens (a step's inputs already in memory, such as the weights of a step in a loop, are named without).
    ``escaped`` counts the elements that left the tensors as Python values; ``end_step`` closes one step."""

    def __init__(self, trace: Trace, names: Mapping[str, torch.Tensor] = {}, write: bool = True) -> None:
        super().__init__()
        self.rec = Recorder(trace)
        self.trace = trace
        self.names = dict(names)
        self.write = write

    @property
    def escaped(self) -> int:
        return self.rec.escaped

    def __enter__(self) -> "TorchTracer":
        for name, tensor in self.names.items():
            self.name(tensor, name, self.write)
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        stack.append(self)
        _patch()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            _state.stack.remove(self)
            _unpatch()

    def name(self, tensor: torch.Tensor, name: str, write: bool = True) -> str:
        """Name ``tensor``'s storage ``name`` (``write``: and emit the write that puts it in memory)."""
        name = self._register(tensor, name)
        if write:
            self.trace.write(name, tensor.numel())
        return name

    def rename(self, tensor: torch.Tensor, name: str) -> None:
        """``tensor``'s storage takes the name ``name`` (see NumpyTracer.rename)."""
        self.rec.rename(_storage(tensor), name)

    def end_step(self) -> None:
        """Close one step of the trace and name the next step's temporaries from position 0 again."""
        self.rec.end_step()

    # -- buffers --
    def _register(self, t: torch.Tensor, name: str) -> str:
        return self.rec.track(_storage(t), name)

    def _read(self, t: torch.Tensor, op: str, j: int) -> None:
        name = self.rec.name_of(id(_storage(t)))
        if name is None:  # a tensor made outside the trace: written where it is first read
            name = self._register(t, self.rec.temp_name(op, j, "in"))
            self.trace.write(name, t.numel())
        self.trace.read(name, t.numel())

    def _written(self, t: torch.Tensor, op: str, j: int) -> None:
        name = self.rec.name_of(id(_storage(t))) or self._register(t, self.rec.temp_name(op, j, "out"))
        self.trace.write(name, t.numel())

    def escape(self, t: torch.Tensor, count: int) -> None:
        """``count`` elements of ``t`` leave the tensors as Python values."""
        self._read(t, "escape", 0)
        self.rec.escaped_values(count)

    # -- operators --
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        op = func._overloadpacket.__name__
        if op in IGNORED:
            return out
        schema = func._schema
        reads: list[torch.Tensor] = []
        written: list[torch.Tensor] = []
        for i, arg in enumerate(schema.arguments):
            value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
            tensors = _tensors(value)
            if not tensors:
                continue
            alias = arg.alias_info
            if alias is not None and alias.is_write:
                written += tensors
                if not arg.kwarg_only and op not in OVERWRITES:
                    reads += tensors  # an in-place operator reads what it updates
            else:
                reads += tensors
        sources = {id(_storage(t)) for t in reads} | {id(_storage(t)) for t in written}
        results = [t for t in _tensors(out) if id(_storage(t)) not in sources]
        if op == "_local_scalar_dense":  # .item(), float(), bool(): the value leaves the tensors
            self.escape(args[0], 1)
            return out
        if not results and not written:  # a view (t, expand, slice, detach): moves nothing
            return out
        for j, t in enumerate(reads):
            self._read(t, op, j)
        for j, t in enumerate(written):
            self._written(t, op, j)
        for j, t in enumerate(results):
            name = self._register(t, self.rec.temp_name(op, j))
            if op not in EMPTY:  # empty memory is written by the operator that fills it
                self.trace.write(name, t.numel())
        if op in ("_to_copy", "copy_") and reads and reads[-1].device.type != "cpu":
            targets = results or written
            if targets and targets[0].device.type == "cpu":  # .cpu() of a device tensor: the values leave it
                self.rec.escaped_values(reads[-1].numel())
        self._count(op, args, reads, results or written)
        self.rec.pos += 1
        return out

    def _count(self, op: str, args: tuple, reads: list[torch.Tensor], outs: list[torch.Tensor]) -> None:
        n_out = sum(t.numel() for t in outs)
        base = _kind_name(op)
        if base in ("mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot") and len(reads) >= 2:
            mats = reads[-2:]  # (..., M, K) @ (..., K, N): the output's elements times K
            k = mats[0].shape[-1] if mats[0].dim() else 1
            self.trace.compute("fma", n_out * k)
            if base.startswith("add") or base.startswith("badd"):
                self.trace.compute("add", n_out)
        elif "scaled_dot_product" in base and len(reads) >= 3:
            q, k = reads[0], reads[1]
            score = q.numel() // max(q.shape[-1], 1) * k.shape[-2]  # B*H*L*S
            factor = 2 if base.endswith("backward") else 1
            self.trace.compute("fma", factor * 2 * score * q.shape[-1])
            self.trace.compute("exp", score)
        elif base in ("convolution", "convolution_backward") and len(reads) >= 2:
            w = reads[1]
            self.trace.compute("fma", n_out * (w.numel() // max(w.shape[0], 1)))
        elif op.startswith("_fused_adam") or op.startswith("_fused_adamw"):
            n = reads[0].numel() if reads else 0
            for kind, per in (("fma", 4), ("mul", 2), ("sqrt", 1), ("div", 1), ("add", 1)):
                self.trace.compute(kind, per * sum(t.numel() for t in _tensors(args[0])) or n)
        elif op.startswith("_foreach_"):
            counted = KIND.get(base)
            if counted is not None:
                self.trace.compute(counted, sum(t.numel() for t in _tensors(args[0])))
        else:
            counted = arithmetic(base, max((t.numel() for t in reads), default=1), n_out)
            if counted is not None:
                self.trace.compute(*counted)


# -- the ways a tensor's values leave as Python values without an aten operator, replaced while a tracer is open --
_ORIG: dict[str, Callable] = {"numpy": torch.Tensor.numpy, "tolist": torch.Tensor.tolist}
_patched = [0]
_patch_lock = threading.Lock()


def _escaping(name: str) -> Callable:
    orig = _ORIG[name]

    def method(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        t = _active()
        if t is not None:
            t.escape(self, self.numel())
        return orig(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = orig.__doc__
    return method


_REPLACEMENTS = {name: _escaping(name) for name in _ORIG}


def _patch() -> None:
    with _patch_lock:
        _patched[0] += 1
        if _patched[0] == 1:
            for name, fn in _REPLACEMENTS.items():
                setattr(torch.Tensor, name, fn)


def _unpatch() -> None:
    with _patch_lock:
        _patched[0] -= 1
        if _patched[0] == 0:
            for name, fn in _ORIG.items():
                setattr(torch.Tensor, name, fn)
