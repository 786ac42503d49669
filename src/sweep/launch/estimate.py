"""What a job of a sweep is expected to take, from the earlier runs of its store (the ETA of the progress line)."""

from __future__ import annotations

import re
import statistics
from typing import Any, Callable, Optional, Sequence

SEED_IN_NAME = re.compile(r"(?:^|\s)seed=\S+")  # a run name's seed (the launcher's Namer: `t50 seed=44`)


def arm(run_name: str) -> str:
    """A run's name without its seed: the runs of one arm of a study share it."""
    return " ".join(SEED_IN_NAME.sub(" ", run_name).split())


def expectation(took: Sequence[Any]) -> Callable[[str, str, str], Optional[float]]:
    """(config hash, run name, method) -> the seconds expected of a job, from earlier runs' `took`
    (sweep.record.earlier, oldest first): the latest run of the same config, else of the same name, else the median
    of its arm's (the same name but the seed), else of its method's; None for a method that never ran. Not the
    median of all: in the experiment `sweep`, gf2's and km's milliseconds made a first mlp_lm run "estimate <1s"."""
    by_key = {key: t.seconds for t in took for key in (t.run_name, t.config_hash) if key}  # the latest of each
    arms: dict[str, list[float]] = {}
    methods: dict[str, list[float]] = {}
    for t in took:
        arms.setdefault(arm(t.run_name), []).append(t.seconds)
        methods.setdefault(t.method, []).append(t.seconds)
    by_arm = {a: statistics.median(s) for a, s in arms.items()}
    by_method = {m: statistics.median(s) for m, s in methods.items() if m}
    return lambda h, name, method: by_key.get(h, by_key.get(name, by_arm.get(arm(name), by_method.get(method))))
