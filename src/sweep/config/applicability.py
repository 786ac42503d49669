"""Which method applies to which problem, checked when the config is composed (sweep.config.rules).

Each method class declares ``problems = (...)``, the problem names it makes sense for, and may declare a
``check_config(cfg)`` classmethod for its own config-time limits (fourier's subset count). The check imports
the ``_target_`` classes, so a new method or problem needs no edit here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hydra.utils import get_class

from sweep.errors import ConfigError

if TYPE_CHECKING:
    from sweep.config.rules import ConfigView


def target_class(cfg: "ConfigView", group: str) -> Any:
    target = cfg.select(f"{group}._target_")
    if not target:
        return None
    try:
        return get_class(target)
    except Exception as e:  # an unimportable _target_ is a config error, not a crash mid-run
        raise ConfigError(f"{group}._target_={target!r} cannot be imported: {e}") from e


def check_method_applies(cfg: "ConfigView") -> None:
    """Raise ConfigError when the method does not apply to the problem (or breaks its own limits)."""
    method_cls, problem_cls = target_class(cfg, "method"), target_class(cfg, "problem")
    if method_cls is None or problem_cls is None:
        return
    allowed = getattr(method_cls, "problems", None)
    problem = getattr(problem_cls, "name", None)
    if allowed is not None and problem not in allowed:
        method = cfg.select("method.name", method_cls.__name__)
        raise ConfigError(f"method={method} does not apply to problem={problem}: "
                          f"method={method} applies to problem in {{{', '.join(allowed)}}}")
    check = getattr(method_cls, "check_config", None)
    if check is not None:
        check(cfg)


def applicability_table() -> str:
    """The method x problem table of the README, as Markdown, from the classes the configs name
    (``python -m sweep.methods.applicability`` prints it; a test keeps the README equal to it)."""
    from omegaconf import OmegaConf

    from sweep.paths import CONF_DIR
    from sweep.config.schema import SCHEMAS

    def target(path, group: str) -> Any:
        """The option's _target_: set in its file, or its schema's (conf/method/X.yaml starts from schema X)."""
        own = OmegaConf.load(path).get("_target_")
        return get_class(own or SCHEMAS[group][path.stem]._target_)

    methods = {p.stem: target(p, "method") for p in sorted((CONF_DIR / "method").glob("*.yaml"))}
    problems = [target(p, "problem").name for p in sorted((CONF_DIR / "problem").glob("*.yaml"))]
    rows = ["| method | " + " | ".join(problems) + " |", "|---|" + "---|" * len(problems)]
    for name, cls in methods.items():
        rows.append(f"| {name} | " + " | ".join("yes" if p in cls.problems else "-" for p in problems) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(applicability_table())
