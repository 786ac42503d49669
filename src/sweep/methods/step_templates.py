"""StepTemplates: SGD's loop records each kind of training step once and replays it after (tracker.scope=all_steps),
so tracing every step of a solve costs one call a step instead of one per event, under either trace source."""

from __future__ import annotations

from typing import Callable, ClassVar

from sweep.methods.base import Context
from sweep.trace.trace import NULL_TRACE, Trace
from sweep.variants.base import Params, Update


class StepTemplates:
    """Records each kind of training step once and replays it after (tracker.scope=all_steps).

    A step's events and operation counts are fixed by the batch size, the parameters' shapes and whether any
    margin was active (the step's return value): the variants branch on nothing else (variants/base.py). So
    once a (batch size, shapes, active) step has been recorded, a later one runs untraced and appends the
    recorded step (Trace.add_step), one call instead of ~60. The outcome is only known after the step, so:
    while no active step of this batch size and shapes has been recorded, steps are recorded; after that they
    run untraced, and an inactive step not seen before is run again, recorded -- it changed no parameter
    (Variant.step), so the second run repeats the first."""

    replay: ClassVar[bool] = True  # False: record every step (the reference the tests compare replay with)

    def __init__(self, ctx: Context) -> None:
        self.steps: dict[tuple, tuple[tuple, dict[str, int], int]] = {}  # key -> (events, op counts, escaped)
        self.ctx = ctx  # its source (hand or auto) records a step

    def step(self, step: Callable, xp, p: Params, xb, yb, update: Update, trace: Trace) -> None:
        shapes = (xb.shape[0],) + tuple(v.shape for v in p.values())
        if self.replay and (shapes, True) in self.steps:
            active = bool(step(xp, p, xb, yb, update, NULL_TRACE))
            if (shapes, active) in self.steps:
                trace.add_step(*self.steps[shapes, active])
                return
            assert not active  # an active step of these shapes is known
        trace.add_step(*self.record(step, xp, p, xb, yb, update, shapes))

    def record(
        self, step: Callable, xp, p: Params, xb, yb, update: Update, shapes: tuple
    ) -> tuple[tuple, dict[str, int], int]:
        rec = Trace()
        with self.ctx.recording(held=p, loaded={"x": xb, "y": yb}, trace=rec) as r:
            r.trace.write("x", xb)
            r.trace.write("y", yb)
            run = step if r.tracer is None else self.ctx.variant.step  # a tracer sees eager ops, not a graph
            active = bool(run(xp, {k: r[k] for k in p}, r["x"], r["y"], update, r.trace))
        (tpl,), _ = rec.segments()
        self.steps[shapes, active] = tpl, rec.compute_ops, rec.escaped
        return tpl, rec.compute_ops, rec.escaped
