"""Hydra's sweep syntax as Optuna distributions: choice(...) and a,b,c -> categorical; range(a, b, step) ->
integers in [a, b) by step; interval(a, b) -> floats in [a, b] (tag(log, ...): log scale; tag(int, ...):
integers). Anything that is not a sweep is a fixed override of every trial."""

from __future__ import annotations

from typing import Any, Optional

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep


class SpaceError(ValueError):
    """A search-space entry Optuna cannot represent; the message names the key."""


def distribution(override: Override) -> Any:
    import optuna.distributions as od  # noqa: PLC0415 - optuna: the [optuna] extra, imported when a search runs

    key, sweep = override.get_key_element(), override.value()
    tags = getattr(sweep, "tags", set()) or set()
    low, high = (sweep.start, sweep.end) if isinstance(sweep, IntervalSweep) else (None, None)
    if isinstance(sweep, RangeSweep):
        low, high = sweep.start, sweep.stop - 1  # (Optuna raised its ValueError's traceback, after its imports)
    if low is not None and (low > high or ("log" in tags and low <= 0) or getattr(sweep, "step", 1) <= 0):
        rule = "low > 0 and low <= high (a log scale)" if "log" in tags else "low <= high"
        rule += ", a step > 0 (a search draws in its own order)" if isinstance(sweep, RangeSweep) else ""
        value = override.input_line.partition("=")[2]
        raise SpaceError(f"{key}: {value!r} is no space Optuna can sample: expected {rule}")
    if isinstance(sweep, ChoiceSweep):
        return od.CategoricalDistribution([_plain(v) for v in sweep.list])
    if isinstance(sweep, RangeSweep):
        if not all(isinstance(v, int) for v in (sweep.start, sweep.stop, sweep.step)):
            return od.CategoricalDistribution(list(override.sweep_iterator()))
        last = sweep.start + ((sweep.stop - 1 - sweep.start) // sweep.step) * sweep.step  # range() excludes stop
        return od.IntDistribution(sweep.start, last, step=sweep.step, log="log" in tags)
    if isinstance(sweep, IntervalSweep):
        if "int" in tags:
            return od.IntDistribution(int(sweep.start), int(sweep.end), log="log" in tags)
        return od.FloatDistribution(float(sweep.start), float(sweep.end), log="log" in tags)
    raise SpaceError(
        f"{key}: {override.input_line!r} is not a search space Optuna can sample "
        "(use choice(...), range(...), interval(...) or a,b,c)"
    )


def points(space: dict[str, Any]) -> Optional[int]:
    """How many distinct points the space holds; None where one of its dimensions is a float interval."""
    import optuna.distributions as od  # noqa: PLC0415 - optuna: the [optuna] extra, imported when a search runs

    n = 1
    for d in space.values():
        if isinstance(d, od.CategoricalDistribution):
            n *= len(d.choices)
        elif isinstance(d, od.IntDistribution):
            n *= (d.high - d.low) // d.step + 1
        else:
            return None
    return n


def holds(space: dict[str, Any], params: dict[str, Any]) -> bool:
    """Whether a trial's `params` is one of `space`'s points: a study resumed with another space holds trials that
    are not, and counting them would end a finite search before its own points had run."""
    import optuna.distributions as od  # noqa: PLC0415 - optuna: the [optuna] extra, imported when a search runs

    if params.keys() != space.keys():
        return False
    for key, d in space.items():
        v = params[key]
        if isinstance(d, od.CategoricalDistribution):
            if not any(type(v) is type(c) and v == c for c in d.choices):  # (True == 1, 1 == 1.0: not one choice)
                return False
        elif isinstance(d, od.IntDistribution):
            if not (isinstance(v, int) and d.low <= v <= d.high and (v - d.low) % d.step == 0):
                return False
        else:
            return False
    return True


def _plain(v: Any) -> Any:
    """A categorical choice as Optuna stores it (None, bool, int, float or str)."""
    return v if v is None or isinstance(v, (bool, int, float, str)) else str(v)


def parse(params: dict[str, str], arguments: list[str], parser: OverridesParser) -> tuple[dict[str, Any], list[str]]:
    """(key -> distribution, fixed overrides) from the config's `params` and the command line's overrides; a key
    on the command line replaces the same key of `params`."""
    lines = {**{k: f"{k}={v}" for k, v in params.items()}}
    for o in parser.parse_overrides(arguments):
        lines[o.get_key_element()] = o.input_line
    space: dict[str, Any] = {}
    fixed: list[str] = []
    for o in parser.parse_overrides(list(lines.values())):
        if o.is_sweep_override():
            space[o.get_key_element()] = distribution(o)
        else:
            fixed.append(o.input_line)
    return space, fixed


def as_override(key: str, value: Any) -> str:
    """A sampled value as a command-line override (strings quoted where Hydra's grammar needs it)."""
    if isinstance(value, str) and not value.replace("_", "").replace("-", "").replace(".", "").isalnum():
        value = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    elif isinstance(value, bool):
        value = str(value).lower()
    return f"{key}={value}"
