"""Memory hierarchies for the energy model: one YAML file each in conf/energy/, chosen by tracker.hierarchy.

A file gives ``bytes_per_float``, ``levels`` (innermost first: capacity_bytes, read_pj, write_pj per float;
the last level's capacity is null, unbounded) and ``ops_pj`` (pJ per operation for every kind in OP_KINDS, or
another hierarchy's name to take its prices). The tracker's ``levels`` / ``ops_pj`` / ``bytes_per_float``
fields override the file key by key (``+tracker.levels.L1.read_pj=2``). Every rule is checked before any job
starts; the error names the field as a user would override it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

import yaml

from sweep.errors import ConfigError
from sweep.paths import CONF_DIR
from sweep.trace.trace import OP_KINDS

HIERARCHY_DIR = CONF_DIR / "energy"
PRICES = ("read_pj", "write_pj")


@dataclass(frozen=True)
class Level:
    name: str
    capacity_bytes: int | None  # None: unbounded (the last level)
    read_pj: float  # per float
    write_pj: float


@dataclass(frozen=True)
class Hierarchy:
    name: str
    levels: tuple[Level, ...]
    ops_pj: Mapping[str, float]
    bytes_per_float: int = 4

    def capacities_floats(self) -> list[int]:
        """Depth limit of every level but the last: depth d fits a level iff d x bytes_per_float <= capacity."""
        return [lv.capacity_bytes // self.bytes_per_float for lv in self.levels[:-1]]  # type: ignore[operator]


def hierarchy_names() -> list[str]:
    return sorted(p.stem for p in HIERARCHY_DIR.glob("*.yaml"))


@lru_cache(maxsize=32)
def _file(name: str) -> dict[str, Any]:
    try:
        with open(HIERARCHY_DIR / f"{name}.yaml") as f:
            spec = yaml.safe_load(f) or {}
    except yaml.YAMLError as e:
        raise ConfigError(
            f"tracker.hierarchy={name!r}: conf/energy/{name}.yaml is not valid YAML ({str(e).splitlines()[0]})"
        ) from None
    if not isinstance(spec, dict):
        raise ConfigError(
            f"tracker.hierarchy={name!r}: conf/energy/{name}.yaml must be a mapping with "
            f"bytes_per_float, levels and ops_pj"
        )
    return spec


def _known(name: Any, field: str) -> dict[str, Any]:
    names = hierarchy_names()
    if not isinstance(name, str) or name not in names:
        raise ConfigError(
            f"{field}={name!r} is not allowed: expected one of {', '.join(names)} (a file conf/energy/<name>.yaml)"
        )
    return _file(name)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load_hierarchy(
    name: str,
    levels: Mapping[str, Any] | None = None,
    ops_pj: Mapping[str, Any] | None = None,
    bytes_per_float: int | None = None,
) -> Hierarchy:
    """The hierarchy file `name` with the tracker's overrides applied; ConfigError names the first bad field."""
    spec = _known(name, "tracker.hierarchy")
    bpf = spec.get("bytes_per_float", 4) if bytes_per_float is None else bytes_per_float
    if not (isinstance(bpf, int) and not isinstance(bpf, bool) and bpf >= 1):
        raise ConfigError(f"tracker.bytes_per_float={bpf!r} is not allowed: expected an integer >= 1")

    file_levels = spec.get("levels") or {}
    if not isinstance(file_levels, Mapping) or not file_levels:
        raise ConfigError(f"tracker.levels is missing in conf/energy/{name}.yaml: expected at least one level")
    for lname in levels or {}:
        if lname not in file_levels:
            raise ConfigError(
                f"tracker.levels.{lname} is not allowed: expected a level of hierarchy {name}: "
                f"one of {', '.join(file_levels)}"
            )
    out: list[Level] = []
    prev: int | None = None
    for i, (lname, lspec) in enumerate(file_levels.items()):
        field = f"tracker.levels.{lname}"
        override = (levels or {}).get(lname) or {}
        if not isinstance(lspec or {}, Mapping) or not isinstance(override, Mapping):
            raise ConfigError(
                f"{field} is not allowed as given: expected a mapping of capacity_bytes, read_pj, write_pj"
            )
        merged = {**(lspec or {}), **override}
        last = i == len(file_levels) - 1
        cap = merged.get("capacity_bytes")
        if cap is None and not last:
            raise ConfigError(
                f"{field}.capacity_bytes is missing: expected an integer > 0 (bytes); only the "
                f"last level is unbounded (null)"
            )
        if cap is not None:
            if not (isinstance(cap, int) and not isinstance(cap, bool) and cap > 0):
                raise ConfigError(f"{field}.capacity_bytes={cap!r} is not allowed: expected an integer > 0 (bytes)")
            if prev is not None and cap <= prev:
                raise ConfigError(
                    f"{field}.capacity_bytes={cap!r} is not allowed: expected more than the level "
                    f"before it ({out[-1].name}: {prev}); capacities increase outwards"
                )
            if cap < bpf:
                raise ConfigError(
                    f"{field}.capacity_bytes={cap!r} is not allowed: expected at least "
                    f"bytes_per_float={bpf} (one float)"
                )
            prev = cap
        for key in PRICES:
            if key not in merged or merged[key] is None:
                raise ConfigError(f"{field}.{key} is missing: expected a price in pJ per float (a number >= 0)")
            if not (_number(merged[key]) and merged[key] >= 0):
                raise ConfigError(f"{field}.{key}={merged[key]!r} is not allowed: expected a number >= 0 (pJ)")
        unknown = set(merged) - {"capacity_bytes", *PRICES}
        if unknown:
            raise ConfigError(
                f"{field}.{sorted(unknown)[0]} is not allowed: expected only capacity_bytes, read_pj, write_pj"
            )
        out.append(Level(lname, None if last else cap, float(merged["read_pj"]), float(merged["write_pj"])))

    ops = _ops(name, spec.get("ops_pj"), {name})
    ops = {**ops, **(ops_pj or {})}
    for kind in OP_KINDS:
        if kind not in ops or ops[kind] is None:
            raise ConfigError(
                f"tracker.ops_pj.{kind} is missing: hierarchy {name} must price every operation "
                f"kind methods report ({', '.join(OP_KINDS)}), in pJ per operation"
            )
        if not (_number(ops[kind]) and ops[kind] >= 0):
            raise ConfigError(f"tracker.ops_pj.{kind}={ops[kind]!r} is not allowed: expected a number >= 0 (pJ)")
    extra = sorted(set(ops) - set(OP_KINDS))
    if extra:
        raise ConfigError(
            f"tracker.ops_pj.{extra[0]} is not allowed: expected an operation kind, one of {', '.join(OP_KINDS)}"
        )
    return Hierarchy(name, tuple(out), {k: float(v) for k, v in ops.items()}, bpf)


def _ops(name: str, ops: Any, seen: set[str]) -> dict[str, Any]:
    """A file's ops_pj: a mapping, or another hierarchy's name (its ops_pj, followed)."""
    if isinstance(ops, str):
        if ops in seen:
            raise ConfigError(
                f"tracker.ops_pj={ops!r} is not allowed: hierarchies {', '.join(sorted(seen))} "
                f"take their prices from each other in a circle"
            )
        return _ops(ops, _known(ops, f"tracker.ops_pj (in conf/energy/{name}.yaml)").get("ops_pj"), seen | {ops})
    return dict(ops or {})


def check_energy_config(cfg: Any) -> None:
    """A config whose tracker names a hierarchy must load (EnergyTracker.check_config)."""
    name = cfg.select("tracker.hierarchy")
    if name is None:
        return
    load_hierarchy(
        name, cfg.select("tracker.levels"), cfg.select("tracker.ops_pj"), cfg.select("tracker.bytes_per_float")
    )
