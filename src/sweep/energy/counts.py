"""What torch.profiler counts of one solve: the kernels it launched, the FLOPs of its matrix products and the bytes
its operations read, the counts a model of the Joules is fitted from (sweeps=proxy_study, docs/energy.md).

- ``kernels``: on a GPU, the device's own events (kernels, copies, sets); on a CPU, the innermost aten operations
  that touch data (an operation none of whose callees does; views and metadata, NO_DATA, touch none).
- ``profiled_flops``: the profiler's FLOPs (``with_flops``: matrix products and convolutions; elementwise work is
  not counted by torch).
- ``profiled_read_bytes``: the leaf operations' input tensors, shape x element size. torch.profiler records inputs,
  not outputs, so bytes written are not here (the trace's level counts have them).

A numpy solve runs no torch operation: it has none of these figures.
"""

from __future__ import annotations

import math
from typing import Any, Callable

COUNTS = ("kernels", "profiled_flops", "profiled_read_bytes")  # a solve's, as profiled_counts names them
# aten operations that make a view or read metadata: no kernel, no bytes moved
NO_DATA = frozenset(
    "aten::" + n
    for n in (
        "resolve_conj resolve_neg view reshape _reshape_alias as_strided t transpose expand permute unsqueeze squeeze "
        "select slice detach alias empty empty_like empty_strided _unsafe_view split chunk unflatten flatten "
        "lift_fresh numpy_T unbind narrow size stride is_nonzero"
    ).split()
)
ELEMENT_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "bool": 1}


def leaf_read_bytes(shapes: list, dtypes: list) -> float:
    """Bytes of an operation's tensor inputs (scalars and lists have no shape, or an empty one: left out)."""
    total = 0.0
    for shape, dtype in zip(shapes, dtypes):
        if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape):
            total += math.prod(shape) * ELEMENT_BYTES.get(dtype, 4)
    return total


def profiled_counts(solve: Callable[[], Any], on_gpu: bool) -> dict[str, float]:
    """Metrics kernels, profiled_flops, profiled_read_bytes of one call of ``solve`` under torch.profiler."""
    import torch  # noqa: PLC0415 - torch: seconds to import, only for device.backend=torch
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    acts = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_gpu else [])]
    with profile(activities=acts, record_shapes=True, with_flops=True) as prof:
        solve()
        if on_gpu:
            torch.cuda.synchronize()
    events = prof.events()

    def touches(e: Any) -> bool:
        return e.name.startswith("aten::") and e.name not in NO_DATA

    def below(e: Any) -> bool:  # does any callee, however deep, touch data?
        return any(touches(c) or below(c) for c in e.cpu_children)

    cpu = torch.autograd.DeviceType.CPU
    leaves = [e for e in events if e.device_type == cpu and touches(e) and not below(e)]
    kernels = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA) if on_gpu else len(leaves)
    flops = float(sum(e.flops or 0 for e in events))
    read = sum(leaf_read_bytes(e.input_shapes, e.input_dtypes) for e in leaves)
    return dict(zip(COUNTS, (float(kernels), flops, read)))
