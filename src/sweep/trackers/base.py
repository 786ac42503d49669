"""The tracker contract: what every tracker option is, with its defaults (it returns a TrackerReport)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from sweep.config.fields import Rule, choice, positive_int
from sweep.trace.report import TrackerReport
from sweep.trace.scope import SCOPES
from sweep.trace.source import METHOD, SOURCES
from sweep.trace.trace import Trace
from sweep.trackers.per_step import per_step_metrics


@dataclass
class TrackerBase:
    """Fields every tracker option carries; the option's schema is derived from its class (sweep.config.schema), and
    tracker=none is this class's fields with nothing built."""

    name: str = "none"
    # published: one single-sample step on the first training sample with margin < 1, after training
    # (seed 001); init_sample0: one step on sample 0 at the initial weights (seed 003); all_steps: every step
    scope: str = "published"
    # hand: the trace.read/write calls placed beside the arithmetic (the published protocols); auto: every array
    # operation the code does, recorded by sweep.trace.auto (docs/traces.md, "Automatic traces"); method: the
    # method's own (its class's trace_source)
    source: str = METHOD
    cache_size_floats: int = 16384

    # the version of the tracker's definition: bumped when the figures it gives for the same trace change, so a
    # run's figures say which definition made them (a tag; sweep-rescore scores recorded runs again)
    version: ClassVar[str] = "1"

    field_rules: ClassVar[tuple[Rule, ...]] = (
        choice("tracker.scope", SCOPES),
        choice("tracker.source", SOURCES),
        Rule("tracker.cache_size_floats", "an integer >= 1", positive_int),
    )

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """What a field's rule cannot say (sweep.config.check, stage 3): raise ConfigError naming the field."""

    def summarize(self, trace: Trace) -> TrackerReport:
        """The figures of a whole trace (metrics) and, per buffer, its own (table)."""
        raise NotImplementedError

    def summarize_each(self, traces: list[Trace]) -> list[dict[str, float]]:
        """The metrics of each trace (all_steps: one per epoch), each on its own, or, for a tracker whose state
        carries from one piece of a run to the next (energy's and ByteDMD's stacks), as consecutive pieces of one
        run, so that they add up to the whole; trackers may batch this."""
        return [self.summarize(t).metrics for t in traces]

    def figures(
        self, trace: Trace, pieces: list[Trace], steps: int = 0
    ) -> tuple[TrackerReport, dict[str, list[float]]]:
        """What a run logs of this tracker: the report of its whole trace and, where the trace comes in pieces
        (all_steps: its epochs), each figure per piece as a curve ``<figure>_per_epoch``. The same for a run
        being solved (sweep.job) and a recorded run scored again from its stored trace (sweep-rescore).
        ``steps``: the run is measured by one traced step (the character models): ``pieces`` are [the step before
        it, the step], and the figures are the step's, per step and times ``steps`` (sweep.trackers.per_step)."""
        if steps:
            return TrackerReport(per_step_metrics(self.summarize_each(pieces)[-1], steps)), {}
        report = self.summarize(trace)
        per_piece = self.summarize_each(pieces) if pieces else []  # batched: one pass, not one per epoch
        return report, {f"{k}_per_epoch": [m[k] for m in per_piece] for k in (per_piece[0] if per_piece else ())}

    def measure(
        self, solve: Callable[[], Any], device: Any, clock: Callable[[], float]
    ) -> tuple[dict[str, float], dict[str, str]]:
        """Measured figures of `solve` (metrics, tags); only the energy tracker measures (sweep.energy.meter)."""
        return {}, {}
