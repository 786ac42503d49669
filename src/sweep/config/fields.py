"""A field's value rule: the field it guards, the values allowed, and the test. The class that owns a field
declares its rules (``field_rules``); ``sweep.config.check`` runs them first, before any cross-field check.

A leaf module (it imports only the error and the closest names): the option classes (problems, methods, trackers)
import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from sweep.config.suggest import closest
from sweep.errors import ConfigError

_ABSENT = object()

# numpy's RandomState takes 0 <= seed < 2**32; the problem seeds it with problem.seed and the MLP-style
# methods with problem.seed + 1 (sweep.methods.sgd.init_params), so the largest seed every job can take is:
SEED_MAX = 2**32 - 2


@dataclass(frozen=True)
class Rule:
    field: str  # dotted key, e.g. "method.lr"
    allowed: str  # human-readable allowed values
    ok: Callable[[Any, Any], bool]  # (value, whole config view) -> valid?
    names: tuple[str, ...] = ()  # a choice's names: a misspelt one is told the closest ("did you mean ...?")


def positive_int(v: Any, _cfg: Any = None) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def nonneg_int(v: Any, _cfg: Any = None) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def positive_finite(v: Any, _cfg: Any = None) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def nonneg_finite(v: Any, _cfg: Any = None) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def fraction(v: Any, _cfg: Any = None) -> bool:
    """A number in (0, 1]: a share of something that must be reached (an accuracy)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1


def choice(field: str, values: Iterable[str], note: str = "") -> Rule:
    """The field takes one of `values`."""
    vals = tuple(values)
    return Rule(field, f"one of {', '.join(vals)}{note}", lambda v, c: v in vals, vals)


def check_rules(rules: Iterable[Rule], view: Any) -> None:
    """Raise ConfigError on the first rule a present field breaks (absent fields are not checked)."""
    for rule in rules:
        value = view.select(rule.field, default=_ABSENT)
        if value is _ABSENT:
            continue
        if not rule.ok(value, view):
            near = closest(value, rule.names) if rule.names and isinstance(value, str) else []
            meant = f"did you mean {' or '.join(near)}? " if near else ""  # tracker.scope=all: all_steps
            raise ConfigError(f"{rule.field}={value!r} is not allowed: {meant}expected {rule.allowed}")


# The hyper-parameters several methods share mean the same in each (SGD and its kin, forward-forward).
METHOD_RULES: tuple[Rule, ...] = (
    Rule("method.hidden", "an integer >= 1", positive_int),
    Rule("method.lr", "a finite number > 0", positive_finite),
    Rule("method.wd", "a finite number >= 0", nonneg_finite),
    # a batch is drawn from the training set: larger, it would be the whole set under another name
    Rule(
        "method.batch_size",
        "an integer from 1 to problem.n_train",
        lambda v, c: positive_int(v) and v <= c.select("problem.n_train", v),
    ),
    Rule("method.max_epochs", "an integer >= 1", positive_int),
    Rule("method.target_accuracy", "a number in (0, 1]: the test accuracy at which training stops", fraction),
)
