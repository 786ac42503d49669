"""device.rng=counter: a method's random draws (initial weights, each epoch's batch order) made on the device by a
counter-based generator, a hash of (seed, draw number, element index), instead of numpy's RandomState on the host.

Why: on a GPU a batch of thousands of runs spent ~75% of its time on the host drawing each run's orders and
initial weights one RandomState at a time (docs/results/gpu.md, the phase profile). A hash needs no state, so
all runs' draws are one vectorised device computation, and a run's draws depend on its seed and draw number
alone: a run gives the same result batched or alone. They are not RandomState's numbers, so a counter run
differs from its numpy (device.rng=host) run; the data is still drawn by the problem on the host.

The hash is Wellons' "lowbias32" integer mixer, applied in int64 arithmetic with 16-bit halves so that no
product overflows (numpy and torch, CPU and CUDA, give the same integers). A permutation is the stable argsort
of 63-bit keys; a normal draw is Box-Muller of two 24-bit uniforms, in float64.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

M32 = 0xFFFFFFFF
STREAM_ORDER, STREAM_NORMAL = 0x5EED0001, 0x5EED0002  # what a draw is for, hashed into its key


def _mul32(x: Any, c: int) -> Any:
    """x * c mod 2**32 for 0 <= x < 2**32, without an int64 overflow (each partial product < 2**48)."""
    return ((x & 0xFFFF) * c + ((((x >> 16) * c) & 0xFFFF) << 16)) & M32


def mix32(x: Any) -> Any:
    """Wellons' lowbias32: a bijective 32-bit mixer (each output bit depends on every input bit)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def _keys(seeds: Any, draws: Any, stream: int) -> Any:
    """One 32-bit key a run (seeds, draws: int64 arrays of shape (R,))."""
    return mix32(mix32(mix32((seeds & M32) ^ stream) ^ (draws & M32)) ^ ((seeds >> 32) & M32))


def _bits(xp: Any, keys: Any, count: int, device: Any, salt: int) -> Any:
    """(R, count) 32-bit hashes of each run's key with each element index."""
    idx = xp.arange(count, dtype=xp.int64, **({} if device is None else {"device": device}))
    return mix32(keys[:, None] ^ mix32(idx ^ salt)[None, :])


def _namespace(be: Any) -> tuple[Any, Any]:
    if be.name == "numpy":
        return np, None
    import torch  # noqa: PLC0415 - torch: seconds to import, only for device.backend=torch

    return torch, be.device


def _ints(xp: Any, values: Any, device: Any) -> Any:
    a = np.asarray(values, dtype=np.int64)
    return a if xp is np else xp.as_tensor(a, device=device)


def permutations(be: Any, seeds: Any, draws: Any, n: int) -> Any:
    """(R, n) int64: run r's permutation of range(n) for its draw number draws[r], on be's device."""
    xp, dev = _namespace(be)
    k = _keys(_ints(xp, seeds, dev), _ints(xp, draws, dev), STREAM_ORDER)
    key63 = (_bits(xp, k, n, dev, 0x0) << 31) | (_bits(xp, k, n, dev, 0x5A5A5A5A) >> 1)  # ties: ~n^2/2^64
    if xp is np:
        return np.argsort(key63, axis=1, kind="stable")
    return xp.argsort(key63, dim=1, stable=True)


def normals(be: Any, seeds: Any, draws: Any, count: int) -> Any:
    """(R, count) float64 standard normal draws of run r's draw number draws[r], on be's device."""
    xp, dev = _namespace(be)
    k = _keys(_ints(xp, seeds, dev), _ints(xp, draws, dev), STREAM_NORMAL)
    f64 = (lambda a: a.astype(np.float64)) if xp is np else (lambda a: a.to(xp.float64))  # torch's default: float32
    u1 = (f64(_bits(xp, k, count, dev, 0x1) >> 8) + 0.5) / 2**24  # in (0, 1): the log below is finite
    u2 = (f64(_bits(xp, k, count, dev, 0x2) >> 8) + 0.5) / 2**24
    return xp.sqrt(-2.0 * xp.log(u1)) * xp.cos(2.0 * math.pi * u2)


class CounterRNG:
    """The draws RandomState gives a method (``permutation``, ``randn``), made by the counter generator on the
    backend's device: the k-th call of a run is draw number k of its seed, as a batch of runs draws it."""

    def __init__(self, be: Any, seed: int) -> None:
        self.be, self.seed, self.draws = be, seed, 0

    def next_draw(self) -> int:
        self.draws += 1
        return self.draws - 1

    def permutation(self, n: int) -> Any:
        return permutations(self.be, [self.seed], [self.next_draw()], n)[0]

    def randn(self, *shape: int) -> Any:
        return normals(self.be, [self.seed], [self.next_draw()], math.prod(shape))[0].reshape(shape)


def permutations_of(be: Any, rngs: list[CounterRNG], n: int) -> Any:
    """Each run's next permutation (one per rng, in order) as one device computation."""
    return permutations(be, [r.seed for r in rngs], [r.next_draw() for r in rngs], n)


def randn_of(be: Any, rngs: list[CounterRNG], *shape: int) -> Any:
    """Each run's next normal draw of ``shape``, stacked: (R, *shape), as one device computation."""
    out = normals(be, [r.seed for r in rngs], [r.next_draw() for r in rngs], math.prod(shape))
    return out.reshape((len(rngs), *shape))


def method_rng(be: Any, seed: int) -> "CounterRNG | np.random.RandomState":
    """A run's own generator (initial weights, batch orders) on backend ``be``: seeded seed + 1 as the group's
    harness seeds it (docs/traces.md), numpy's RandomState under device.rng=host, the counter generator under
    device.rng=counter."""
    return CounterRNG(be, seed + 1) if getattr(be, "rng", "host") == "counter" else np.random.RandomState(seed + 1)
