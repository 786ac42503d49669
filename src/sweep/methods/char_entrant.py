"""Running a user's character model: the one place that calls `train(train_text, valid_text)` and holds what it
returns (method=char_model).

`start` loads the function (`method.path`) in a sandboxed process of its own (sweep.sandbox: a fresh
interpreter, an environment and a working directory of its own, bubblewrap's isolation where it runs), sends it
the training and validation texts (never the test text: it is read by the parent after training), and calls it
there through the harness (sweep.challenge.harness: the run's seed, the trace) under the parent's clock: past
`max_train_s` the process is killed and the run fails (TrainingTimeLimit), as the group disqualifies it. The
model stays in that process; what `start` returns streams through it one round trip a character (`Remote`), for
the parent's scorer (sweep.methods.char_stream). Closing it ends the process and everything it started.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from sweep.sandbox import EntrantFailed, Handle, Limits, Sandbox, TimeLimit
from sweep.sandbox.target import find
from sweep.trace import stored
from sweep.trace.trace import Trace

TRAIN_ARGS = ("train_text", "valid_text")  # the group's interface: train(train_text, valid_text=None) -> CharModel
INTERFACE = ("reset", "predict", "observe")
HARNESS = "sweep.challenge.harness:train_here"
LOAD_S = 60.0  # importing the entrant's module (and torch, for the harness) in its process
CALL_S = 60.0  # the most seconds one reset/predict/observe round trip may take
PIECE = 64 << 20  # bytes of text a message frame carries (a frame is at most 256 MB)
# no address-space limit: a CUDA context reserves far more virtual memory than any limit a GPU job could set
LIMITS = Limits(load_s=LOAD_S, memory_mb=0)


class TrainingTimeLimit(RuntimeError):
    """Training took longer than the challenge allows."""


class NotACharModel(TypeError):
    """train() returned an object without the streaming interface."""


class EntrantError(RuntimeError):
    """The entrant's process failed (raised, exited, crashed, ran out of memory, answered garbage)."""


def check(path: str) -> None:
    """The function `path` names, loaded and checked in a sandbox of its own (ConfigError naming method.path);
    once per process while its file is unchanged (a sweep checks each of its jobs)."""
    file = find(path).file
    stat = file.stat() if file is not None else None
    _check(path, stat and (stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=64)
def _check(path: str, version: Any) -> None:
    Sandbox(path, signature=TRAIN_ARGS, limits=LIMITS).open().close()


@dataclass
class Trained:
    model: Any  # the handle the scorer streams through (Remote)
    source: str  # the entrant's module's text
    train_s: float  # the training call on the parent's clock
    train_cpu_s: float  # its process's CPU seconds in that call (the kernel's: whatever ran, Python included)
    steps: int = 0  # torch optimizer steps training took (0: none seen)
    trace: Trace | None = None  # the training's trace (None: not traced)
    torch_model: bool = False  # its module imported torch as it loaded: modelled by sampled optimizer steps alone
    late_torch: bool = False  # torch was imported inside train(): its steps could not be sampled
    step_traces: dict[str, Trace] = field(default_factory=dict)  # two sampled steps ({} where none were)
    box: Sandbox | None = None

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def close(self) -> None:
        """End the entrant's process."""
        if self.box is not None:
            self.box.close()
            self.box = None


class Repr:
    """What the entrant sent that was not a key or a number, shown as it was (the scorer rejects it)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class Remote:
    """The model in its process, as the scorer's `Streaming`: reset() and observe(char) are one round trip each
    and bring back the next prediction, which predict() returns."""

    def __init__(self, box: Sandbox, run: Handle) -> None:
        self.box, self.run = box, run
        self.next: Any = None

    def reset(self) -> None:
        self.next = self._call("reset")

    def predict(self) -> Any:
        return self.next

    def observe(self, char: str) -> None:
        self.next = self._call("step", char)

    def _call(self, name: str, *args: Any) -> Any:
        try:
            payload = self.box.method(self.run, name, *args, timeout=CALL_S)
        except EntrantFailed as e:
            raise EntrantError(f"the model's {'observe' if name == 'step' else name}() failed: {e}") from None
        if isinstance(payload, dict):
            return Repr(str(payload.get("not_a_mapping")))
        return {
            k if isinstance(k, str) else Repr(str(k.get("key"))): v if isinstance(v, float) else Repr(str(v))
            for k, v in payload
        }


def _pieces(text: str) -> list[np.ndarray]:
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    return [data[i : i + PIECE] for i in range(0, len(data), PIECE)] or [data]


def start(
    path: str,
    train_text: str,
    valid_text: str,
    seed: int,
    max_train_s: float,
    traced: bool,
    around: Callable[[Callable[[], Any]], Any] = lambda call: call(),
) -> Trained:
    """Train the model `path` names (the module's docstring); `traced`: trace its training (not on a GPU, whose
    counter is read instead); `around`: what wraps the training call alone (the GPU's meter)."""
    box = Sandbox(path, signature=TRAIN_ARGS, limits=LIMITS, harnesses=(HARNESS,)).open()
    try:
        texts = (_pieces(train_text), _pieces(valid_text))
        try:
            run = around(lambda: box.call(*texts, seed, traced, timeout=max_train_s, harness=HARNESS, keep=True))
        except TimeLimit:
            raise TrainingTimeLimit(
                f"training ran past challenge.max_train_s={max_train_s:g} (its process killed)"
            ) from None
        except EntrantFailed as e:
            raise EntrantError(f"method.path={path}: train() failed: {e}") from None
        train_s, cpu_s = box.wall_s, box.used.cpu_s
        *lacking, kind = box.method(run, "lacking", timeout=CALL_S)
        if lacking:
            raise NotACharModel(
                f"method.path={path}: train() returned a {kind} without {', '.join(lacking)}: "
                f"expected a model with {', '.join(INTERFACE)}"
            )
        figures = box.method(run, "figures", timeout=CALL_S)
    except BaseException:
        box.close()
        raise
    trace, pieces = None, {}
    if figures.get("trace"):
        trace, pieces, _ = stored.loads(figures["trace"])
        trace.escaped = int(figures["escaped"])
    steps, torch_model, late = int(figures["steps"]), bool(figures["torch"]), bool(figures["late_torch"])
    return Trained(Remote(box, run), box.source, train_s, cpu_s, steps, trace, torch_model, late, pieces, box)
