"""The modelled energy of a user's torch training, from two of its own optimizer steps traced.

A user's `train()` is a loop the harness does not write, but a torch model trains through `torch.optim`, whose
global step hooks mark every step's end. While training runs, the hook counts the steps and, from the end of
step AT, opens the automatic torch trace (sweep.trace.auto.TorchTracer, the optimizer's parameters and state
named) over the next two steps: the first finds parameters and moments written, the second is the measured one,
as `sweep.methods.lm.train.traced_steps` traces the project's own models. The run's figures are that step's
times the steps taken (sweep.trackers.per_step): a model, not a measurement, and only as good as "every step is
alike" (a loop that changes its batch size or model mid-run breaks it).

The two traced steps run inside training, so their tracing is on the training clock (for a small model, a few
tenths of a second against the minutes allowed). A model that is not torch's (the numpy n-gram) is traced whole
by the automatic numpy trace instead (sweep.challenge.harness); a torch model's work outside its optimizer's
steps (a hand-written update, features computed before the loop, its numpy batches) is not seen.
"""

from __future__ import annotations

import sys
from typing import Any

from sweep.trace.trace import Trace

AT = 2  # steps left untraced first (the optimizer's state is made at its first step)


class SampledSteps:
    """While open, traces steps AT + 1 and AT + 2 of any torch optimizer into `trace`; `steps` counts them all."""

    def __init__(self, trace: Trace) -> None:
        self.trace, self.steps = trace, 0
        self.traces: dict[str, Trace] = {}  # {"before", "step"} once both were traced
        self._hook: Any = None
        self._tracer: Any = None
        self._mark: tuple[int, dict[str, int]] = (0, {})

    def __enter__(self) -> "SampledSteps":
        if "torch" in sys.modules:  # a torch model's module imported it as it loaded
            from torch.optim.optimizer import register_optimizer_step_post_hook  # noqa: PLC0415

            self._hook = register_optimizer_step_post_hook(self._stepped)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._hook is not None:
            self._hook.remove()
        if self._tracer is not None:  # training ended inside the sample: no figures
            self._tracer.__exit__(None, None, None)
            self._tracer, self.traces = None, {}

    def _stepped(self, opt: Any, args: Any, kwargs: Any) -> None:
        self.steps += 1
        if self.steps == AT:
            self._open(opt)
        elif self._tracer is not None and self.steps in (AT + 1, AT + 2):
            self._tracer.end_step()
            self.traces["before" if self.steps == AT + 1 else "step"] = self.trace.since(*self._mark)
            self._mark = (len(self.trace.seq), dict(self.trace.compute_ops))
            if self.steps == AT + 2:
                self._tracer.__exit__(None, None, None)
                self._tracer = None

    def _open(self, opt: Any) -> None:
        import torch  # noqa: PLC0415 - imported already (the hook is torch's)

        from sweep.trace.auto import TorchTracer  # noqa: PLC0415 - the trace machinery: only for a torch model

        names: dict[str, Any] = {}
        for g, group in enumerate(opt.param_groups):
            for i, p in enumerate(group["params"]):
                names[f"param.{g}.{i}"] = p
                state = opt.state.get(p, {})
                names.update({f"opt.{g}.{i}.{k}": s for k, s in state.items() if torch.is_tensor(s) and s.dim()})
        self.trace.end_step()
        self._mark = (len(self.trace.seq), dict(self.trace.compute_ops))
        self._tracer = TorchTracer(self.trace, names)
        self._tracer.__enter__()
