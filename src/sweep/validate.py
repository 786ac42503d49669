"""Value rules a structured-config type cannot express. Checked before any job starts.

Each rule names the field it guards and what values are allowed, so the error tells the user exactly what to
change. Methods and variants may add their own rules (``RULES`` is a plain list to extend).

Rules read the job's resolved config as plain data (``ConfigView``: ``c.problem.n_bits`` works as on a
DictConfig): converting the job's groups once costs less than a dozen lookups through OmegaConf, and the
launcher checks every job of a sweep before any starts.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

from omegaconf import DictConfig, OmegaConf

from sweep.backend import AUTOCAST_DTYPES, COMPILE_MODES
from sweep.errors import ConfigError  # noqa: F401 - raised here, and imported from here by the app
from sweep.schema import JOB_GROUPS




class ConfigView(dict):
    """A job's resolved config as plain nested dicts, read like a DictConfig (`c.method.lr`, `c.get(...)`)."""

    def __getattr__(self, key: str) -> Any:
        try:
            value = self[key]
        except KeyError:
            raise AttributeError(key) from None
        return ConfigView(value) if isinstance(value, dict) else value

    def select(self, dotted: str, default: Any = None) -> Any:
        node: Any = self
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @classmethod
    def of(cls, cfg: "DictConfig | dict[str, Any]") -> "ConfigView":
        """The job groups of `cfg`, resolved (a plain dict, e.g. sweep.job.job_config's, is taken as it is)."""
        if isinstance(cfg, ConfigView):
            return cfg
        if isinstance(cfg, dict):
            return cls(cfg)
        return cls({k: OmegaConf.to_container(cfg[k], resolve=True) for k in JOB_GROUPS if k in cfg})


@dataclass(frozen=True)
class Rule:
    field: str  # dotted key, e.g. "method.lr"
    allowed: str  # human-readable allowed values
    ok: Callable[[Any, ConfigView], bool]  # (value, whole config) -> valid?


def _positive_int(v: Any, _cfg: ConfigView) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _positive_finite(v: Any, _cfg: ConfigView) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _nonneg_finite(v: Any, _cfg: ConfigView) -> bool:
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
    Rule("method.chunk", "an integer >= 1", _positive_int),
    Rule("tracker.scope", "one of published, init_sample0, all_steps",
         lambda v, c: v in ("published", "init_sample0", "all_steps")),
    Rule("tracker.cache_size_floats", "an integer >= 1", _positive_int),
    Rule("tracker.meter", "one of auto, none", lambda v, c: v in ("auto", "none")),
    Rule("tracker.meter_window_s", "a finite number > 0", _positive_finite),
    Rule("device.price_per_hour", "a finite number >= 0, or null (the Modal price of device.gpu)",
         lambda v, c: v is None or _nonneg_finite(v, c)),
    Rule("device.backend", "one of numpy, torch", lambda v, c: v in ("numpy", "torch")),
    Rule("device.threads", "an integer >= 0 (0: the libraries' defaults)", lambda v, c: isinstance(v, int) and v >= 0),
    Rule("device.compile_mode", f"one of {', '.join(COMPILE_MODES)}", lambda v, c: v in COMPILE_MODES),
    Rule("device.autocast", f"one of {', '.join(AUTOCAST_DTYPES)} (float16/bfloat16 need device.backend=torch)",
         lambda v, c: v in AUTOCAST_DTYPES and (v == "none" or c.device.backend == "torch")),
    Rule("device.dtype", "one of float32, float64", lambda v, c: v in ("float32", "float64")),
]

_MISSING = object()


def validate(cfg: "DictConfig | dict[str, Any]", runs_here: bool = False) -> None:
    """Raise ConfigError on the first rule a present field breaks (absent fields are not checked). `cfg`: the
    composed config, or the job's resolved config as plain data (sweep.job.job_config). `runs_here`: the job
    runs on this machine (a single run, a local worker, Modal offline), so its device must be here too."""
    view = ConfigView.of(cfg)
    for rule in RULES:
        value = view.select(rule.field, default=_MISSING)
        if value is _MISSING:
            continue
        if not rule.ok(value, view):
            raise ConfigError(f"{rule.field}={value!r} is not allowed: expected {rule.allowed}")
    for check in EXTRA_CHECKS:
        check(view)
    if runs_here:
        from sweep.backend import require_device

        require_device(str(view.select("device.backend", "numpy")), str(view.select("device.torch_device", "cpu")))


# Cross-field checks that are not a single field's rule (e.g. method x problem applicability).
EXTRA_CHECKS: list[Callable[[ConfigView], None]] = []


@functools.lru_cache(maxsize=None)
def _fields(group: str, option: Any, target: Any) -> Optional[frozenset[str]]:
    """The keys option `option` of `group` may hold: its schema's fields and its class's parameters (a
    `_target_` set to another class may take others); None when any key goes (a class taking **kwargs)."""
    from sweep.methods.applicability import target_class
    from sweep.schema import SCHEMAS

    schemas = SCHEMAS.get(group, {})
    schema = schemas.get(option) or (next(iter(schemas.values())) if len(schemas) == 1 else None)
    known = {f.name for f in dataclasses.fields(schema)} if schema is not None else set()
    cls = target_class(ConfigView({group: {"_target_": target}}), group) if target else None
    if cls is not None:
        params = inspect.signature(cls).parameters.values()
        if any(p.kind == p.VAR_KEYWORD for p in params):
            return None
        known |= {p.name for p in params}
    return frozenset(known) if known else None


def _known_keys(cfg: ConfigView) -> None:
    """Every key of a job group is one its option takes: `+method.lrr=0.1` (how Hydra adds a key) is a misspelt
    key, refused here with the keys there are, rather than by the class's constructor inside the job."""
    for group in JOB_GROUPS:
        node = cfg.get(group)
        if not isinstance(node, dict):
            continue
        known = _fields(group, node.get("name"), node.get("_target_"))
        unknown = sorted(k for k in node if known is not None and k not in known)
        if unknown:
            keys = ", ".join(sorted(k for k in known if k not in ("_target_", "name")))
            raise ConfigError(f"{group}.{unknown[0]} is not a key of {group}={node.get('name', '?')}: expected one "
                              f"of {keys}")


EXTRA_CHECKS.append(_known_keys)


def _tile_size_divides_hidden(cfg: ConfigView) -> None:
    """A tiled variant (its class says ``tiled``): tile_size must divide method.hidden (the error lists the
    divisors that would)."""
    from sweep.methods.applicability import target_class

    if not getattr(target_class(cfg, "variant"), "tiled", False):
        return
    variant = cfg.select("variant.name")
    hidden = cfg.select("method.hidden")
    if not isinstance(hidden, int) or hidden < 1:
        raise ConfigError(f"variant={variant} needs a method with hidden units (method.hidden); "
                          f"method={cfg.select('method.name', '?')} has none")
    size = cfg.select("variant.tile_size")
    divisors = [d for d in range(1, hidden + 1) if hidden % d == 0]
    if size not in divisors or isinstance(size, bool):
        raise ConfigError(f"variant.tile_size={size!r} is not allowed: expected a divisor of "
                          f"method.hidden={hidden}: one of {', '.join(map(str, divisors))}")


EXTRA_CHECKS.append(_tile_size_divides_hidden)


def _method_applies(cfg: ConfigView) -> None:
    """method x problem: each method class declares the problems it applies to (sweep.methods.applicability)."""
    from sweep.methods.applicability import check_method_applies

    check_method_applies(cfg)


EXTRA_CHECKS.append(_method_applies)


def _energy_hierarchy(cfg: ConfigView) -> None:
    """tracker=energy: the hierarchy file and its overrides (sweep.trackers.hierarchy)."""
    from sweep.trackers.hierarchy import check_energy_config

    check_energy_config(cfg)


EXTRA_CHECKS.append(_energy_hierarchy)


def _fits_in_memory(cfg: ConfigView) -> None:
    """The job's estimated memory against what this machine has left (sweep.size_guard), last: the value
    rules above first say what is wrong with a field."""
    from sweep.size_guard import check_fits

    check_fits(cfg)


EXTRA_CHECKS.append(_fits_in_memory)
