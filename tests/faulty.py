"""A method that fails inside its job on a value every rule allows: how the suite makes a job fail after all
checks have passed (as a user's job fails on a bug, not on bad input, which is refused before any job)."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.methods.base import Context, Outcome
from sweep.methods.fourier import Fourier

FAULTY_CHUNK = 13


@dataclass
class FaultyFourier(Fourier):
    def solve(self, ctx: Context) -> Outcome:
        if self.chunk == FAULTY_CHUNK:
            raise ValueError(f"method.chunk={FAULTY_CHUNK}: failing on purpose (tests/faulty.py)")
        return super().solve(ctx)
