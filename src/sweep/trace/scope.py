"""Which steps of a solve are traced (tracker.scope): the one vocabulary methods test, never a bare string."""

from __future__ import annotations

from enum import Enum


class Scope(str, Enum):
    # one single-sample step on the first training sample with margin < 1, after training (seed 001)
    PUBLISHED = "published"
    # one step on sample 0 at the initial weights (seed 003)
    INIT_SAMPLE0 = "init_sample0"
    # every training step
    ALL_STEPS = "all_steps"


SCOPES: tuple[str, ...] = tuple(s.value for s in Scope)


def traced(scope: "Scope | str", trace_enabled: bool, which: Scope) -> bool:
    """Is the step `which` names traced: the job's scope is `which` and a trace is being written."""
    return trace_enabled and Scope(scope) is which
