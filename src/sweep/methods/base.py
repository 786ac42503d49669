"""The method contract (MethodBase: what a method is, with its defaults), what every method returns, and the
context it runs in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, ContextManager, Optional

import numpy as np

from sweep.backend import Backend
from sweep.config.fields import Rule
from sweep.config.footprint import Term
from sweep.problems.base import Dataset, Problem
from sweep.trace.scope import Scope, traced
from sweep.trace.source import Recording, Source, recording
from sweep.trace.trace import Trace

# An exact method's `vectorised` keys: its runs batch as several solves one after another in one task
# (no solve_batch), so a seed sweep pays the per-job cost once; no hyper-parameter of theirs is vectorised.
SEEDS_ONLY: tuple[str, ...] = ("problem.seed",)


@dataclass
class Context:
    """Everything a method may use besides its own hyper-parameters."""

    problem: Problem
    data: Dataset
    backend: Backend
    trace: Trace  # NullTrace when tracking is off
    scope: Scope = Scope.PUBLISHED  # tracker.scope: which steps are traced
    variant: Any = None  # a sweep.variants Variant; only SGD-like methods use it
    source: Source = Source.HAND  # tracker.source: hand-placed calls or the recorded array operations

    def traces(self, which: Scope) -> bool:
        """Is the step `which` names traced in this solve (the scope is `which` and a trace is written)?"""
        return traced(self.scope, self.trace.enabled, which)

    def recording(
        self,
        held: dict[str, Any] = {},
        loaded: dict[str, Any] = {},
        trace: Trace | None = None,
        backend: str | None = None,
    ) -> ContextManager[Recording]:
        """Trace a piece of the solve into ``trace`` (default: the run's) from this run's source
        (sweep.trace.source.recording): ``held`` arrays already in memory, ``loaded`` ones written now; ``backend``:
        the array library the piece runs on, where it is not the run's (numpy | torch)."""
        return recording(
            self.trace if trace is None else trace, self.source, backend or self.backend.name, held, loaded
        )


@dataclass
class Outcome:
    """A method's answer, and how to evaluate it.

    What the clock times (job.run's ``wall_clock_s``): ``solve()`` learning the answer, that is producing the
    secret or the trained weights, including any check the algorithm itself needs to decide when to stop
    (SGD's per-epoch "test accuracy reached?" early stopping). Evaluating the answer is not learning:
    the reported test and train accuracy, per-epoch curves and other diagnostics are computed by
    ``evaluate``, which job.run calls through ``finalize()`` after reading the clock. A method that already
    knows a figure from its stopping check may set it directly instead of evaluating it twice.

    ``curves`` are per-epoch metric steps (name -> list of values).
    """

    accuracy: float = float("nan")  # test accuracy; set by ``evaluate`` unless known from the solve
    train_accuracy: float = float("nan")
    secret_found: tuple[int, ...] | None = None
    epochs: int = 0
    curves: dict[str, list[float]] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)  # further scalar metrics
    traces: dict[str, Trace] = field(default_factory=dict)  # extra named traces, e.g. per-epoch (all_steps)
    # A run measured by one traced step (the character models): {"before": the step before it, "step": the step},
    # and the steps the run took; its figures are the step's times `steps` (sweep.trackers.per_step)
    step_traces: dict[str, Trace] = field(default_factory=dict)
    steps: int = 0
    tags: dict[str, str] = field(default_factory=dict)  # further run tags (a user's solver's source hash)
    artifacts: dict[str, str] = field(default_factory=dict)  # further run files: name -> text (its source)
    evaluate: Optional[Callable[["Outcome"], None]] = None  # fills in the figures above, after the clock

    def finalize(self) -> "Outcome":
        """Run ``evaluate`` once (idempotent); returns self."""
        if self.evaluate is not None:
            work, self.evaluate = self.evaluate, None
            work(self)
        return self


def subset_outcome(problem: Problem, data: Dataset, found: tuple[int, ...], **extra: float) -> Outcome:
    """The outcome of a method whose answer is a subset of the bits; its test and train accuracy (the
    hypothesis 'label = problem's label on the found subset') are evaluated after the clock."""

    def evaluate(o: Outcome) -> None:
        o.accuracy = subset_accuracy(problem, found, data.x_test, data.y_test)
        o.train_accuracy = subset_accuracy(problem, found, data.x_train, data.y_train)

    return Outcome(secret_found=found, extra=dict(extra), evaluate=evaluate)


def subset_accuracy(problem: Problem, found: tuple[int, ...], x, y) -> float:
    """Accuracy of the hypothesis 'label = problem's label on the found subset' on (x, y)."""

    if found is None or len(found) == 0:
        return 0.0
    pred = problem.labels(x, tuple(found))
    return float(np.mean(np.asarray(pred) == np.asarray(y)))


class MethodBase:
    """What a method is: the class a conf/method/ option's `_target_` names (docs/extending.md, "Add a method").

    A method is a dataclass subclass of this: its fields are its hyper-parameters (the option's schema is derived
    from them, sweep.config.schema) and it implements `solve`. What else a method may say has its default here,
    the one place it is written; the check refuses a `method._target_` that is not a MethodBase."""

    # the problems (their `name`) the method makes sense for (sweep.config.applicability); None: every problem
    problems: ClassVar[Optional[tuple[str, ...]]] = None
    # dotted job-config keys that may differ between runs solved together in one task (sweep.batch.key):
    # () never batches; SEEDS_ONLY: several seeds' solves one after another
    vectorised: ClassVar[tuple[str, ...]] = ()
    # tracker.source=method's source (sweep.trace.source): its hand-placed trace calls, or auto (every array op)
    trace_source: ClassVar[str] = Source.HAND.value
    # its step is a variant's (sweep.variants): a variant other than standard applies to it
    takes_variant: ClassVar[bool] = False
    field_rules: ClassVar[tuple[Rule, ...]] = ()  # its fields' value rules (sweep.config.fields)
    # its size, classmethods (cfg) -> [Term] (sweep.config.footprint) that the one estimate before any job reads
    # (sweep.config.memory): the bytes of its big arrays, the operations no run can skip, those of a run that never
    # stops early. None: not sized, never refused for its size (docs/extending.md's brute searched until killed)
    footprint: ClassVar[Optional[Callable[[Any], list[Term]]]] = None
    least_work: ClassVar[Optional[Callable[[Any], list[Term]]]] = None
    most_work: ClassVar[Optional[Callable[[Any], list[Term]]]] = None

    name: str  # the option's name (a dataclass field of the subclass, its default the option's name)

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """What a field's rule cannot say (sweep.config.check, stage 3): raise ConfigError naming the field."""

    @classmethod
    def applies_to(cls, problem: str) -> bool:
        """Does the method make sense for problem `problem` (its name)?"""
        return cls.problems is None or problem in cls.problems

    @classmethod
    def batchable(cls, ctx: Context) -> bool:
        """May this run be solved with the others of its batch (sweep.batch.run)? No: it is solved alone."""
        return True

    def solve(self, ctx: Context) -> Outcome:
        """Learn the answer (timed: sweep.job); evaluating it is the Outcome's `evaluate`, after the clock."""
        raise NotImplementedError

    def warmup(self, ctx: Context) -> None:
        """The untraced, untimed warm-up before the timed solve on a backend that needs one (torch's lazy start):
        a whole solve, unless the method has a cheaper one (a long training: a few steps)."""
        self.solve(ctx)
