"""method=curriculum: SGD on a narrow problem first, then wider ones (seed 002: 14.6x faster at n=50).

Stage widths come from ``schedule`` (default 10 -> 30) and always end at problem.n_bits. A stage of width w
keeps the same rows and the same secret: its inputs are the secret bits plus the first w - k other bits, in
their original order (the teacher hands out an easier instance of the same task). Between stages W1 is
widened: the trained columns keep their weights, the new input bits get small random columns
(``widen_scale``). The loop, the variants and the trace are SGD's (this class extends it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from sweep.config.fields import METHOD_RULES, Rule, nonneg_finite, positive_int
from sweep.methods import batched
from sweep.methods.base import Context, Outcome
from sweep.methods.epoch_log import EpochLog
from sweep.methods.sgd import SGD, WEIGHTS, init_params
from sweep.trace.scope import Scope
from sweep.trace.trace import NULL_TRACE
from sweep.variants.base import Params


def stage_widths(schedule: list[int], n_bits: int, k: int) -> list[int]:
    """The widths trained on, narrowest first, ending at n_bits (each at least k, so the secret fits)."""
    return sorted({max(int(w), k) for w in schedule if int(w) < n_bits}) + [n_bits]


def stage_columns(secret: tuple[int, ...], n_bits: int, width: int) -> np.ndarray:
    """The input bits of a stage of the given width: the secret plus the first width - k other bits."""
    others = np.setdiff1d(np.arange(n_bits), np.asarray(secret, dtype=np.int64))
    return np.sort(np.concatenate([np.asarray(secret, dtype=np.int64), others[: width - len(secret)]]))


@dataclass
class Curriculum(SGD):
    # widening W1 is the MLP's (sparse_sum's linear model is sgd's)
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity", "sparse_and")
    field_rules: ClassVar[tuple[Rule, ...]] = (
        *METHOD_RULES,
        Rule("method.widen_scale", "a finite number >= 0 (the std of W1's added columns)", nonneg_finite),
        Rule(
            "method.schedule",
            "a list of input widths, integers >= 1 (those >= problem.n_bits are skipped)",
            lambda v, c: isinstance(v, list) and all(positive_int(w) for w in v),
        ),
    )
    name: str = "curriculum"
    # input widths trained on before problem.n_bits (widths >= n_bits are skipped; n_bits always ends it)
    schedule: list[int] = field(default_factory=lambda: [10, 30])
    widen_scale: float = 0.01  # std of the new W1 columns added when the input widens

    def widen(self, ctx: Context, p: Params, old: np.ndarray, new: np.ndarray, rng: Any) -> None:
        """W1 (H, len(old)) -> (H, len(new)): old columns kept in place, added ones drawn small."""
        be, xp = ctx.backend, ctx.backend.xp
        H = p["W1"].shape[0]
        added = np.setdiff1d(new, old)
        fresh = be.asarray(rng.randn(H, added.size) * self.widen_scale)
        order = np.argsort(np.concatenate([old, added]), kind="stable")  # back to the stage's column order
        # part of the training only when every step is traced (else the trace is one step's, by itself)
        trace = ctx.trace if ctx.traces(Scope.ALL_STEPS) else NULL_TRACE
        with ctx.recording(held={"W1": p["W1"]}, loaded={"W1_new": fresh}, trace=trace) as r:
            for name, size in ctx.variant.w1_buffers(H, old.size):
                r.trace.read(name, size)
            widened = xp.take(xp.concat([r["W1"], r["W1_new"]], axis=1), be.index(order), axis=1)
            r.rename(widened, "W1")  # auto: the widened matrix is W1 from its write on
            for name, size in ctx.variant.w1_buffers(H, new.size):
                r.trace.write(name, size)
        p["W1"] = r.unwrap(widened)

    def solve(self, ctx: Context) -> Outcome:
        be, xp, d, prob = ctx.backend, ctx.backend.xp, ctx.data, ctx.problem
        widths = stage_widths(list(self.schedule), prob.n_bits, prob.k_sparse)
        cols = stage_columns(d.secret, prob.n_bits, widths[0])
        p_np, rng = init_params(cols.size, self.hidden, prob.seed, be)
        self.trace_start(ctx, p_np, d.x_train[:1, cols])
        p = {k: be.asarray(v) for k, v in p_np.items()}
        y, yt = be.asarray(d.y_train), be.asarray(d.y_test)
        log, epochs, stages_trained = EpochLog(), 0, 0
        for stage, width in enumerate(widths):
            if stage > 0:
                new = stage_columns(d.secret, prob.n_bits, width)
                self.widen(ctx, p, cols, new, rng)
                cols = new
            x, xt = be.asarray(d.x_train[:, cols]), be.asarray(d.x_test[:, cols])
            if stage > 0 and self.reached(xp, p, xt, yt):
                continue  # the widened net already solves the wider stage
            # hidden progress is measured from the stage's start (W1 changes shape when it widens)
            measure = self.measure(xp, x, y, xt, yt, {k: p[k] * 1.0 for k in WEIGHTS})
            e, _ = self.train_epochs(ctx, p, x, y, xt, yt, rng, self.max_epochs, log, measure, first=stage == 0)
            epochs += e
            stages_trained += 1
        if ctx.traces(Scope.PUBLISHED):
            self.trace_published_step(ctx, p, d.x_train, d.y_train)
        outcome = self.outcome(ctx, p, epochs, log, xt, yt)
        outcome.extra["stages"] = float(len(widths))
        outcome.extra["stages_trained"] = float(stages_trained)
        return outcome

    @classmethod
    def solve_runs(cls, methods: list["Curriculum"], ctxs: list[Context]) -> list["Outcome | BaseException"]:
        """SGD.solve_batch for the curriculum: every run goes through the same stage widths, each with its own
        columns (its own secret), widening draws and skipped stages (a run that already solves a wider stage
        is frozen for it, as its solo run skips it)."""
        first, be = methods[0], ctxs[0].backend
        xp, prob, runs = be.xp, ctxs[0].problem, range(len(ctxs))
        widths = stage_widths(list(first.schedule), prob.n_bits, prob.k_sparse)
        cols = [stage_columns(c.data.secret, prob.n_bits, widths[0]) for c in ctxs]
        inits = [init_params(cols[r].size, first.hidden, c.problem.seed, be) for r, c in enumerate(ctxs)]
        started = batched.each(
            list(runs), lambda r: methods[r].trace_start(ctxs[r], inits[r][0], ctxs[r].data.x_train[:1, cols[r]])
        )
        rngs = [i[1] for i in inits]
        p = {k: batched.stack(be, [i[0][k] for i in inits]) for k in inits[0][0]}
        y, yt = (batched.stack(be, [getattr(c.data, a) for c in ctxs]) for a in ("y_train", "y_test"))
        logs = [EpochLog() for _ in runs]
        epochs, stages_trained = np.zeros(len(ctxs), dtype=int), np.zeros(len(ctxs), dtype=int)
        for stage, width in enumerate(widths):
            if stage > 0:
                new = [stage_columns(c.data.secret, prob.n_bits, width) for c in ctxs]
                q = [{"W1": p["W1"][r]} for r in runs]
                for r in runs:
                    methods[r].widen(ctxs[r], q[r], cols[r], new[r], rngs[r])
                p["W1"], cols = xp.stack([qr["W1"] for qr in q]), new
            x = batched.stack(be, [c.data.x_train[:, cols[r]] for r, c in enumerate(ctxs)])
            xt = batched.stack(be, [c.data.x_test[:, cols[r]] for r, c in enumerate(ctxs)])
            data = (x, y, xt, yt)
            # a run whose widened net already solves the wider stage skips it (False: not started, not failed)
            solved = batched.reached(be, p, xt, yt, first.target_accuracy) if stage > 0 else np.zeros(len(ctxs), bool)
            stage_started = [False if s is None and solved[r] else s for r, s in enumerate(started)]
            epochs += first.train_runs(methods, ctxs, p, data, rngs, logs, stage_started)
            stages_trained += np.array([s is None for s in stage_started])

        def finish(r: int) -> Outcome:
            outcome = methods[r].run_outcome(ctxs[r], p, r, int(epochs[r]), logs[r], data, started[r])
            outcome.extra["stages"] = float(len(widths))
            outcome.extra["stages_trained"] = float(stages_trained[r])
            return outcome

        return batched.each(list(runs), finish)
