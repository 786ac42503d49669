"""Array backends: one method implementation runs on numpy (CPU) and PyTorch (CPU or CUDA).

Methods get ``backend.xp``, an array-API namespace (``array_api_compat``), and never import numpy or torch
themselves. The data is always drawn on the host with numpy; a method's own draws (initial weights, batch
orders) are too under ``rng=host``, so a seed gives the same run on every backend, or on the device under
``rng=counter`` (sweep.methods.counter_rng: cuda's default, where host draws dominated a large batch).

Timing (seed 004): ``clock()`` synchronises the device before reading the time, and torch backends
``needs_warmup``: job.run times a first, untimed-for-the-result solve (CUDA context, kernel caches,
torch.compile) as ``warmup_s`` apart from the steady-state solve it reports as ``wall_clock_s``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable

import numpy as np
from threadpoolctl import threadpool_limits

from sweep.errors import NoDeviceHere

# torch.compile's modes (torch.compile(mode=...)); "default" is torch's own default
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# device.autocast: the hot step's matmuls in a lower precision (torch.autocast), or none
AUTOCAST_DTYPES = ("none", "float16", "bfloat16")


def require_device(backend: str, device: str) -> None:
    """Refuse a CUDA device on a machine without one, before any job work (a ConfigError: exit 2, no run)."""
    if backend != "torch" or not device.startswith("cuda"):
        return
    import torch  # noqa: PLC0415 - torch: seconds to import, only for device.backend=torch

    if not torch.cuda.is_available():
        raise NoDeviceHere(
            f"device.torch_device={device!r} needs a CUDA GPU and this machine has none (torch {torch.__version__} "
            "sees no CUDA device)"
        )


@dataclass
class Backend:
    """device=cpu is Backend('numpy'); device=cuda is Backend('torch', 'cuda'); device=torch_cpu for CI."""

    name: str = "numpy"  # numpy | torch (device.backend)
    device: str = "cpu"  # torch device string when name=torch (device.torch_device)
    # The knobs below are device config fields of the same names (KNOBS; sweep.config.schema.DeviceConfig carries them).
    dtype: str = "float64"  # float64: the seeds' precision; float32: faster, see README "float32 on CPU"
    compile: bool = False  # torch.compile the hot step (seed 004)
    compile_backend: str = "inductor"  # torch.compile backend (inductor; aot_eager compiles in seconds)
    compile_mode: str = "default"  # one of COMPILE_MODES (seed 004 tunes with max-autotune)
    fullgraph: bool = False  # torch.compile(fullgraph=True): a graph break is an error, not a Python fallback
    # mixed precision for the hot step: one of AUTOCAST_DTYPES (torch.autocast; seed 004's fp16 matmuls)
    autocast: str = "none"
    # where a method's random draws are made: host (numpy's RandomState, the same run on every backend) or counter
    # (a counter-based hash on the device, sweep.methods.counter_rng: a run equals itself batched or alone)
    rng: str = "host"
    threads: int = 0  # CPU threads of torch's intra-op pool and numpy's BLAS; 0 leaves the libraries' defaults
    _compiled: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.name == "numpy":
            import array_api_compat.numpy as xp  # noqa: PLC0415 - array_api_compat.numpy: ~0.13 s, when the backend is first used (a worker preloads it)

            self.xp: Any = xp
            self._dtype = getattr(np, self.dtype)
        else:
            import array_api_compat.torch as xp  # noqa: PLC0415 - torch: seconds to import, only for device.backend=torch
            import torch  # noqa: PLC0415 - torch: seconds to import, only for device.backend=torch

            require_device(self.name, self.device)
            self.xp = xp
            self._torch = torch
            self._dtype = getattr(torch, self.dtype)
            if self.threads:
                torch.set_num_threads(self.threads)
        if self.threads:
            # small nets on a busy CPU: every op of a 2-thread pool waits for a descheduled thread (2-core machine
            # shared with other work, 96 SGD steps: torch 5.7 s vs 0.055 s at hidden 64, numpy's OpenBLAS 1.4-6.7 s
            # vs 0.10 s at hidden 1024). Process-wide, as both libraries' pools are.
            threadpool_limits(limits=self.threads, user_api="blas")

    @property
    def needs_warmup(self) -> bool:
        """numpy has nothing to warm up; torch has lazy initialisation (and compilation) on first use."""
        return self.name == "torch"

    def asarray(self, a: np.ndarray):
        if self.name == "numpy":
            return np.asarray(a, dtype=self._dtype)
        if isinstance(a, self._torch.Tensor):  # drawn on the device (rng=counter)
            return a.to(device=self.device, dtype=self._dtype)
        return self._torch.as_tensor(np.asarray(a), dtype=self._dtype, device=self.device)

    def index(self, a: np.ndarray):
        """An integer index array (e.g. a permutation drawn on the host) on this backend's device."""
        if self.name == "numpy":
            return np.asarray(a, dtype=np.intp)
        if isinstance(a, self._torch.Tensor):  # drawn on the device (rng=counter)
            return a.to(device=self.device, dtype=self._torch.long)
        return self._torch.as_tensor(np.asarray(a), dtype=self._torch.long, device=self.device)

    def to_numpy(self, a) -> np.ndarray:
        if self.name == "numpy":
            return np.asarray(a)
        return a.detach().cpu().numpy()

    def compiled(self, fn: Callable) -> Callable:
        """The hot step as configured (seed 004): fn itself, or torch.compile(fn) when device.compile=true
        (mode device.compile_mode, fullgraph device.fullgraph), run under torch.autocast when device.autocast
        names a dtype. Compiled once per function, so the warm-up solve pays the compilation and the timed
        solve reuses it."""
        if self.name != "torch" or not (self.compile or self.autocast != "none"):
            return fn
        key = getattr(fn, "__func__", fn)
        if key not in self._compiled:
            target = key
            if self.compile:
                if not self._compiled:
                    # dynamo caches compiled code per code object, process-wide: without a reset, a job run after
                    # another in the same worker reuses that job's graphs (and its fullgraph/mode choice)
                    self._torch.compiler.reset()
                mode = None if self.compile_mode == "default" else self.compile_mode
                target = self._torch.compile(
                    key, backend=self.compile_backend, dynamic=False, mode=mode, fullgraph=self.fullgraph
                )
                if self.fullgraph:
                    target = self._one_graph(target, key.__qualname__)
            if self.autocast != "none":
                target = self._autocast(target)
            self._compiled[key] = target
        target = self._compiled[key]
        owner = getattr(fn, "__self__", None)
        return target if owner is None else (lambda *a, **kw: target(owner, *a, **kw))

    def _one_graph(self, fn: Callable, name: str) -> Callable:
        """fullgraph=True turns a graph break into torch's multi-page error at the first call: one line instead,
        naming the step and the break (SGD's step has data-dependent exits, e.g. no sample inside the margin).
        torch raises Unsupported for code it cannot trace and UserError for a branch on a tensor's value; the
        latter's first line is advice, its "Caused by:" line the place."""
        exc = self._torch._dynamo.exc
        breaks = (exc.Unsupported, exc.UserError)

        def run(*a: Any, **kw: Any) -> Any:
            try:
                return fn(*a, **kw)
            except breaks as e:
                lines = str(e).strip().splitlines()
                where = next((ln.strip() for ln in lines if ln.startswith("Caused by:")), lines[0] if lines else "")
                raise RuntimeError(f"device.fullgraph=true: {name} has a graph break: {where}") from None

        return run

    def _autocast(self, fn: Callable) -> Callable:
        torch, dtype = self._torch, getattr(self._torch, self.autocast)
        device_type = self.device.split(":")[0]

        def run(*a: Any, **kw: Any) -> Any:
            with torch.autocast(device_type, dtype=dtype):
                return fn(*a, **kw)

        return run

    def sync(self) -> None:
        """Wait for queued device work, so a clock read after it is honest (seed 004)."""
        if self.name == "torch" and self.device.startswith("cuda"):
            self._torch.cuda.synchronize()

    def clock(self) -> float:
        self.sync()
        return time.perf_counter()

    def scalar(self, a) -> float:
        return float(a.item()) if hasattr(a, "item") else float(a)


# Backend fields that a device config sets by the same name (all but which library and which torch device)
KNOBS: tuple[str, ...] = tuple(
    f.name for f in fields(Backend) if f.name not in ("name", "device") and not f.name.startswith("_")
)
