"""Which method applies to which problem, and the class behind each option of a job.

Each method class declares ``problems = (...)``, the problem names it makes sense for (MethodBase). The check
imports the ``_target_`` classes, so a new method or problem needs no edit here; a class that is not a subclass of
its group's contract (sweep.config.schema.CONTRACTS) is refused. `python -m sweep.config.applicability`
prints the README's method x problem table (a test keeps the README equal to it).
"""

from __future__ import annotations

import functools
from typing import Any

from hydra.utils import get_class
from omegaconf import OmegaConf

from sweep.config.schema import CONTRACTS, SCHEMAS
from sweep.errors import ConfigError
from sweep.paths import CONF_DIR


def option_class(cfg: Any, group: str) -> Any:
    """The class an option of `group` is built from: its `_target_`, or for an option that builds nothing
    (tracker=none) the class its schema was derived from; None for plain-data options (device). A class that is
    not its group's contract's subclass (a function, another class) is a ConfigError."""
    target = cfg.select(f"{group}._target_")
    if not target:
        schema = SCHEMAS.get(group, {}).get(str(cfg.select(f"{group}.name")))
        target = getattr(schema, "source_class", None)
        if not target:
            return None
    try:
        cls = _class(target)
    except Exception as e:  # an unimportable _target_ is a config error, not a crash mid-run
        why = " ".join(str(e).split())  # Hydra's reason spans lines: one line, as every refusal
        raise ConfigError(f"{group}._target_={target!r} cannot be imported: {why}") from e
    contract = CONTRACTS.get(group)
    if contract and not (isinstance(cls, type) and issubclass(cls, _class(contract))):
        raise ConfigError(
            f"{group}._target_={target!r} is not a {group}: expected a subclass of {contract} (docs/extending.md)"
        )
    return cls


@functools.lru_cache(maxsize=256)
def _class(target: str) -> Any:
    """get_class, once per target: a sweep's check looks up each job's classes (a failure is not kept)."""
    return get_class(target)


def check_method_applies(cfg: Any) -> None:
    """Raise ConfigError when the method does not apply to the problem."""
    if not cfg.select("method._target_") or not cfg.select("problem._target_"):
        return
    method_cls, problem = option_class(cfg, "method"), option_class(cfg, "problem").name
    if not method_cls.applies_to(problem):
        method = cfg.select("method.name", method_cls.__name__)
        takers = ", ".join(name for name, cls in _methods().items() if cls.applies_to(problem))
        raise ConfigError(
            f"method={method} does not apply to problem={problem}: "
            f"method={method} applies to problem in {{{', '.join(method_cls.problems)}}}; problem={problem} takes "
            f"method in {{{takers}}}"
        )


def check_variant_applies(cfg: Any) -> None:
    """Raise ConfigError for a variant other than standard on a method whose step is not a variant's (the method
    class declares `takes_variant`): it would change nothing, yet name the run (gf2-fused) and its params."""
    variant = cfg.select("variant.name", "standard")
    if variant == "standard" or not cfg.select("method._target_"):
        return
    if not option_class(cfg, "method").takes_variant:
        takers = ", ".join(name for name, cls in _methods().items() if cls.takes_variant)
        raise ConfigError(
            f"variant={variant} does not apply to method={cfg.select('method.name', '?')}: a variant orders the "
            f"MLP's training step, which only method in {{{takers}}} takes: use variant=standard"
        )


def _target(path: Any, group: str) -> Any:
    """The class of option file `path`: its _target_, or its schema's (conf/method/X.yaml starts from schema X)."""
    own = OmegaConf.load(path).get("_target_")
    return get_class(own or SCHEMAS[group][path.stem]._target_)


@functools.cache
def _methods() -> dict[str, Any]:
    """Each method option (conf/method/) and its class."""
    return {p.stem: _target(p, "method") for p in sorted((CONF_DIR / "method").glob("*.yaml"))}


def applicability_table() -> str:
    """The method x problem table of the README, as Markdown, from the classes the configs name."""
    methods = _methods()
    problems = [_target(p, "problem").name for p in sorted((CONF_DIR / "problem").glob("*.yaml"))]
    rows = ["| method | " + " | ".join(problems) + " |", "|---|" + "---|" * len(problems)]
    for name, cls in methods.items():
        rows.append(f"| {name} | " + " | ".join("yes" if cls.applies_to(p) else "-" for p in problems) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(applicability_table())
