"""What every method returns, and the context it runs in."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from sweep.backend import Backend
from sweep.problems.base import Dataset, Problem
from sweep.trackers.trace import Trace


@dataclass
class Context:
    """Everything a method may use besides its own hyper-parameters."""

    problem: Problem
    data: Dataset
    backend: Backend
    trace: Trace  # NullTrace when tracking is off
    scope: str = "published"  # tracker.scope: which steps are traced
    variant: Any = None  # a sweep.variants Variant; only SGD-like methods use it


@dataclass
class Outcome:
    """A method's answer. ``curves`` are per-epoch metric steps (name -> list of values)."""

    accuracy: float
    train_accuracy: float
    secret_found: tuple[int, ...] | None = None
    epochs: int = 0
    curves: dict[str, list[float]] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)  # further scalar metrics
    traces: dict[str, Trace] = field(default_factory=dict)  # extra named traces, e.g. per-epoch (all_steps)
    # Diagnostics that are not part of the solve (per-epoch curves from weight snapshots): job.run calls
    # finalize() after reading the clock, so wall_clock_s times the solve alone.
    deferred: Optional[Callable[["Outcome"], None]] = None

    def finalize(self) -> "Outcome":
        """Run the deferred diagnostics once (idempotent); returns self."""
        if self.deferred is not None:
            work, self.deferred = self.deferred, None
            work(self)
        return self


def subset_accuracy(problem: Problem, found: tuple[int, ...], x, y) -> float:
    """Accuracy of the hypothesis 'label = problem's label on the found subset' on (x, y)."""
    import numpy as np

    if found is None or len(found) == 0:
        return 0.0
    pred = problem.labels(x, tuple(found))
    return float(np.mean(np.asarray(pred) == np.asarray(y)))
