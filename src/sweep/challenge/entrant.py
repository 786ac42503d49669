"""Running a user's character model: the one place that calls `train(train_text, valid_text)` and holds what it
returns (method=char_model).

`start` loads the function (`method.path`), seeds the global generators from the run's seed (Python's, numpy's,
torch's where the file uses it: the interface has no seed, so a seed is the harness's), calls it with the training
and validation texts (never the test text) on this process's clock, and checks what came back has the group's
streaming interface. Training past `max_train_s` fails the run (TrainingTimeLimit), as the group disqualifies it.

The model runs in this process: nothing stops it from reaching what the process holds. The sandboxed entrant
(a fresh process given only the texts, its model kept there as a handle: issue 41) replaces the call in `start`
and nothing else: the scorer calls `reset/predict/observe` on whatever `start` returns.
"""

from __future__ import annotations

import random
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from sweep.challenge.load import Loaded, load
from sweep.challenge.sampled_steps import SampledSteps
from sweep.trace.source import Source, recording
from sweep.trace.trace import Trace

TRAIN_ARGS = ("train_text", "valid_text")  # the group's interface: train(train_text, valid_text=None) -> CharModel
INTERFACE = ("reset", "predict", "observe")


class TrainingTimeLimit(RuntimeError):
    """Training took longer than the challenge allows."""


class NotACharModel(TypeError):
    """train() returned an object without the streaming interface."""


@dataclass
class Trained:
    model: Any  # the handle the scorer streams through (in this process: the model itself)
    loaded: Loaded  # the function, its source and the source's hash
    train_s: float  # train()'s wall-clock on this process's clock
    steps: int = 0  # torch optimizer steps training took (0: none seen)
    step_traces: dict[str, Trace] = field(default_factory=dict)  # two sampled steps ({} where none were traced)

    def close(self) -> None:
        """Let the model go (a sandboxed one: its process ends)."""
        self.model = None


def seed_everything(seed: int) -> None:
    random.seed(seed)
    import numpy as np  # noqa: PLC0415 - numpy is always there; imported here to keep the seam's imports short

    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


def start(path: str, train_text: str, valid_text: str, seed: int, max_train_s: float, trace: Trace | None) -> Trained:
    """Train the model `path` names (the module's docstring); `trace`: where its training is traced (None: not
    traced, as on a GPU whose counter is read instead): the whole of it by the automatic numpy trace, and two of
    its torch optimizer steps where it has them (sweep.challenge.sampled_steps)."""
    loaded = load(path, TRAIN_ARGS)
    seed_everything(seed)
    sampler = SampledSteps(trace) if trace is not None else None
    with recording(trace, Source.AUTO, "numpy") if trace is not None else nullcontext(), sampler or nullcontext():
        t0 = time.perf_counter()
        model = loaded.fn(train_text, valid_text)
        train_s = time.perf_counter() - t0
    if train_s > max_train_s:
        raise TrainingTimeLimit(f"training took {train_s:.1f} s, past challenge.max_train_s={max_train_s:g}")
    lacking = [m for m in INTERFACE if not callable(getattr(model, m, None))]
    if lacking:
        raise NotACharModel(
            f"method.path={path}: train() returned a {type(model).__name__} without {', '.join(lacking)}: "
            f"expected a model with {', '.join(INTERFACE)}"
        )
    steps, traces = (sampler.steps, sampler.traces) if sampler is not None else (0, {})
    return Trained(model, loaded, train_s, steps, traces)
