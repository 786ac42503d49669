"""Value rules a structured-config type cannot express. Checked before any job starts.

Each rule names the field it guards and what values are allowed, so the error tells the user exactly what to
change. Methods and variants may add their own rules (``RULES`` is a plain list to extend).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf


class ConfigError(ValueError):
    """A composed config that cannot run; the message names the field and the allowed values."""


@dataclass(frozen=True)
class Rule:
    field: str  # dotted key, e.g. "method.lr"
    allowed: str  # human-readable allowed values
    ok: Callable[[Any, DictConfig], bool]  # (value, whole config) -> valid?


def _positive_int(v: Any, _cfg: DictConfig) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _positive_finite(v: Any, _cfg: DictConfig) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _nonneg_finite(v: Any, _cfg: DictConfig) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


RULES: list[Rule] = [
    Rule("problem.n_bits", "an integer >= 1", _positive_int),
    Rule("problem.k_sparse", "an integer with 1 <= k_sparse <= problem.n_bits",
         lambda v, c: _positive_int(v, c) and v <= c.problem.n_bits),
    Rule("problem.n_train", "an integer >= 1", _positive_int),
    Rule("problem.n_test", "an integer >= 1", _positive_int),
    Rule("problem.seed", "an integer >= 0", lambda v, c: isinstance(v, int) and v >= 0),
    Rule("method.hidden", "an integer >= 1", _positive_int),
    Rule("method.lr", "a finite number > 0", _positive_finite),
    Rule("method.wd", "a finite number >= 0", _nonneg_finite),
    Rule("method.batch_size", "an integer >= 1", _positive_int),
    Rule("method.max_epochs", "an integer >= 1", _positive_int),
    Rule("method.influence_samples", "an integer >= 1", _positive_int),
    Rule("tracker.scope", "one of published, init_sample0, all_steps",
         lambda v, c: v in ("published", "init_sample0", "all_steps")),
    Rule("tracker.cache_size_floats", "an integer >= 1", _positive_int),
    Rule("device.price_per_hour", "a finite number >= 0", _nonneg_finite),
    Rule("device.backend", "one of numpy, torch", lambda v, c: v in ("numpy", "torch")),
]

_MISSING = object()


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError on the first rule a present field breaks (absent fields are not checked)."""
    for rule in RULES:
        value = OmegaConf.select(cfg, rule.field, default=_MISSING)
        if value is _MISSING:
            continue
        if not rule.ok(value, cfg):
            raise ConfigError(f"{rule.field}={value!r} is not allowed: expected {rule.allowed}")
    for check in EXTRA_CHECKS:
        check(cfg)


# Cross-field checks that are not a single field's rule (e.g. method x problem applicability).
EXTRA_CHECKS: list[Callable[[DictConfig], None]] = []


def _tile_size_divides_hidden(cfg: DictConfig) -> None:
    """variant=tiled: tile_size must divide method.hidden (the error lists the divisors that would)."""
    if OmegaConf.select(cfg, "variant.name", default=None) != "tiled":
        return
    hidden = OmegaConf.select(cfg, "method.hidden", default=None)
    if not isinstance(hidden, int) or hidden < 1:
        raise ConfigError(f"variant=tiled needs a method with hidden units (method.hidden); "
                          f"method={OmegaConf.select(cfg, 'method.name', default='?')} has none")
    size = OmegaConf.select(cfg, "variant.tile_size", default=None)
    divisors = [d for d in range(1, hidden + 1) if hidden % d == 0]
    if size not in divisors or isinstance(size, bool):
        raise ConfigError(f"variant.tile_size={size!r} is not allowed: expected a divisor of "
                          f"method.hidden={hidden}: one of {', '.join(map(str, divisors))}")


EXTRA_CHECKS.append(_tile_size_divides_hidden)


def _method_applies(cfg: DictConfig) -> None:
    """method x problem: each method class declares the problems it applies to (sweep.methods.applicability)."""
    from sweep.methods.applicability import check_method_applies

    check_method_applies(cfg)


EXTRA_CHECKS.append(_method_applies)
