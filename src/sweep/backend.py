"""Array backends: one method implementation runs on numpy (CPU) and PyTorch (CPU or CUDA).

Methods get ``backend.xp``, an array-API namespace (``array_api_compat``), and never import numpy or torch
themselves. Random draws always happen on the host with numpy, so a seed gives the same data and initial
weights on every backend.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Backend:
    """device=cpu is Backend('numpy'); device=cuda is Backend('torch', 'cuda'); device=torch_cpu for CI."""

    name: str = "numpy"
    device: str = "cpu"
    dtype: str = "float64"
    compile: bool = False

    def __post_init__(self) -> None:
        if self.name == "numpy":
            import array_api_compat.numpy as xp

            self.xp: Any = xp
            self._dtype = getattr(np, self.dtype)
        else:
            import array_api_compat.torch as xp
            import torch

            self.xp = xp
            self._torch = torch
            self._dtype = getattr(torch, self.dtype)

    def asarray(self, a: np.ndarray):
        if self.name == "numpy":
            return np.asarray(a, dtype=self._dtype)
        return self._torch.as_tensor(np.asarray(a), dtype=self._dtype, device=self.device)

    def index(self, a: np.ndarray):
        """An integer index array (e.g. a permutation drawn on the host) on this backend's device."""
        if self.name == "numpy":
            return np.asarray(a, dtype=np.intp)
        return self._torch.as_tensor(np.asarray(a), dtype=self._torch.long, device=self.device)

    def to_numpy(self, a) -> np.ndarray:
        if self.name == "numpy":
            return np.asarray(a)
        return a.detach().cpu().numpy()

    def sync(self) -> None:
        """Wait for queued device work, so a clock read after it is honest (seed 004)."""
        if self.name == "torch" and self.device.startswith("cuda"):
            self._torch.cuda.synchronize()

    def clock(self) -> float:
        self.sync()
        return time.perf_counter()

    def scalar(self, a) -> float:
        return float(a.item()) if hasattr(a, "item") else float(a)
