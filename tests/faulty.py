"""A method that fails inside its job on a value every rule allows: how the suite makes a job fail after all
checks have passed (as a user's job fails on a bug, not on bad input, which is refused before any job)."""

from __future__ import annotations

from dataclasses import dataclass

from sweep.methods.base import Context, Outcome
from sweep.methods.fourier import Fourier
from sweep.methods.sgd import SGD

FAULTY_CHUNK = 13


@dataclass
class FaultyFourier(Fourier):
    def solve(self, ctx: Context) -> Outcome:
        if self.chunk == FAULTY_CHUNK:
            raise ValueError(f"method.chunk={FAULTY_CHUNK}: failing on purpose (tests/faulty.py)")
        return super().solve(ctx)


DIVERGENT_LR = 1e6  # FaultySGD's learning rate that diverges: the run raises, as a divergent run does


def _diverged(lr: float) -> FloatingPointError:
    return FloatingPointError(f"method.lr={lr:g} diverged: non-finite weights (tests/faulty.py)")


@dataclass
class FaultySGD(SGD):
    """SGD whose run at DIVERGENT_LR fails in its solve, alone or in a batch (its own solve_batch puts the
    exception in that run's place and solves the others as SGD solves them)."""

    def solve(self, ctx: Context) -> Outcome:
        if self.lr >= DIVERGENT_LR:
            raise _diverged(self.lr)
        return super().solve(ctx)

    @classmethod
    def solve_batch(cls, methods: list[SGD], ctxs: list[Context]) -> list[Outcome | BaseException]:
        ok = [i for i, m in enumerate(methods) if m.lr < DIVERGENT_LR]
        inner = getattr(SGD, "solve_batch", None)
        if inner is not None:
            solved = list(inner.__func__(cls, [methods[i] for i in ok], [ctxs[i] for i in ok]))
        else:
            solved = [methods[i].solve(ctxs[i]) for i in ok]
        out: list[Outcome | BaseException] = [_diverged(m.lr) for m in methods]
        for i, o in zip(ok, solved):
            out[i] = o
        return out
