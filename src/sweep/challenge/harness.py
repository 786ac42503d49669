"""The character challenge's harness inside the entrant's sandboxed process (sweep.sandbox: imported there before
the entrant's module, and called around its `train`).

`train_here` takes the texts (UTF-8 bytes, in pieces: a pipe's frame is at most 256 MB), seeds the global
generators from the run's seed, and calls `train(train_text, valid_text)`; where asked it traces the training
(the automatic numpy trace of the whole of it, two torch optimizer steps where it has them:
sweep.challenge.sampled_steps). The two are never mixed: a torch model (its module imported torch as it loaded,
before the clock) is sampled by its optimizer's steps alone (as method=mlp_lm and gpt are measured, its numpy
work unseen), any other model traced whole by numpy. A model that imports torch inside train() pays the import
on its clock, and its steps cannot be sampled (`late_torch`: its energy is not modelled).

The model stays in this process, inside a `Run` kept as a handle: the parent
streams through `reset()` and `step(char)`, each one round trip that returns the next prediction, so the parent
sends position i only once it holds the prediction of position i. Predictions go back as (key, value) pairs,
anything that is not a string key or a number sent as its repr, for the parent to judge (sweep.methods.char_stream):
nothing in this process decides a score.
"""

from __future__ import annotations

import numbers
import random
import sys
from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any, Callable

import numpy as np

from sweep.challenge.sampled_steps import SampledSteps
from sweep.trace import stored
from sweep.trace.source import Source, recording
from sweep.trace.trace import Trace

INTERFACE = ("reset", "predict", "observe")


def text_of(pieces: list[np.ndarray]) -> str:
    return b"".join(p.tobytes() for p in pieces).decode("utf-8")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def train_here(fn: Callable[..., Any], train: list, valid: list, seed: int, traced: bool) -> "Run":
    train_text, valid_text = text_of(train), text_of(valid)
    seed_everything(seed)
    trace = Trace() if traced else None
    sampler = SampledSteps(trace) if trace is not None else None
    torch_model = "torch" in sys.modules  # the entrant's module imported it as it loaded (not on the clock)
    whole = trace is not None and not torch_model  # a numpy model: its whole training under the numpy trace
    with recording(trace, Source.AUTO, "numpy") if whole else nullcontext(), sampler or nullcontext():
        model = fn(train_text, valid_text)
    return Run(model, trace, sampler, torch_model, late_torch="torch" in sys.modules and not torch_model)


class Run:
    """A trained model and what its training left (the trace), kept in the entrant's process."""

    def __init__(
        self, model: Any, trace: Trace | None, sampler: SampledSteps | None, torch_model: bool, late_torch: bool
    ) -> None:
        self.model, self.trace, self.sampler = model, trace, sampler
        self.torch_model, self.late_torch = torch_model, late_torch

    def lacking(self) -> list[str]:
        """The interface's methods the model has not (their names, and its type's)."""
        return [m for m in INTERFACE if not callable(getattr(self.model, m, None))] + [type(self.model).__name__]

    def figures(self) -> dict[str, Any]:
        """The training's trace (sweep.trace.stored's text, with the sampled steps as its pieces) and its steps."""
        if self.trace is None or self.sampler is None:
            return {"steps": 0, "trace": None, "torch": self.torch_model, "late_torch": self.late_torch}
        s, t = self.sampler, self.trace
        pieces = s.traces if len(s.traces) == 2 else {}
        dumped = stored.dumps(t, pieces, len(pieces) and s.steps)
        return {
            "steps": s.steps,
            "trace": dumped,
            "escaped": t.escaped,
            "torch": self.torch_model,
            "late_torch": self.late_torch,
        }

    def reset(self) -> list:
        self.model.reset()
        return self.predict()

    def step(self, char: str) -> list:
        self.model.observe(char)
        return self.predict()

    def predict(self) -> Any:
        p = self.model.predict()
        if not isinstance(p, Mapping):
            return {"not_a_mapping": repr(p)[:60]}
        return [[k if isinstance(k, str) else {"key": repr(k)[:60]}, _number(v)] for k, v in p.items()]


def _number(v: Any) -> Any:
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return float(v)
    return {"value": repr(v)[:60]}
