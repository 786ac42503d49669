"""gf2 that logs the process that solved it (metric `worker_pid`): how the suite sees which worker ran a batch."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from sweep.methods.base import Context, Outcome
from sweep.methods.gf2 import GF2


@dataclass
class PidGF2(GF2):
    def solve(self, ctx: Context) -> Outcome:
        out = super().solve(ctx)
        out.extra["worker_pid"] = float(os.getpid())
        return out


@dataclass
class SlowSeed0GF2(PidGF2):
    """PidGF2 whose seed-0 job takes 3 s: a batch holding it runs long while the others are quick."""

    def solve(self, ctx: Context) -> Outcome:
        if ctx.problem.seed == 0:
            time.sleep(3)
        return super().solve(ctx)


@dataclass
class StuckSeed0GF2(PidGF2):
    """PidGF2 whose seed-0 job never ends by itself (it sleeps for ten minutes): only a time limit stops it."""

    def solve(self, ctx: Context) -> Outcome:
        if ctx.problem.seed == 0:
            time.sleep(600)
        return super().solve(ctx)


@dataclass
class StuckSeed0BatchGF2(StuckSeed0GF2):
    """StuckSeed0GF2 solved by a `solve_batch` of its own, which says nothing of which run it is solving."""

    @classmethod
    def solve_batch(cls, methods: list[GF2], ctxs: list[Context]) -> list[Outcome]:
        return [m.solve(c) for m, c in zip(methods, ctxs)]


@dataclass
class DiesSeed3GF2(PidGF2):
    """PidGF2 whose seed-3 job kills its own worker (SIGKILL, as the kernel's OOM killer or a kill -9 would)."""

    def solve(self, ctx: Context) -> Outcome:
        if ctx.problem.seed == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().solve(ctx)
