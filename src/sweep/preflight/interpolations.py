"""Interpolations (`${...}`) checked once they resolve, before any job: OmegaConf converts what one resolves to into
the field's type (`mlflow.force=${problem.seed}` was true: 42 is not 0), and a Hydra key that does not resolve
(`hydra.job.name=${oops}`) was a traceback from Hydra's logging set-up, which reads it in a key of its own."""

from __future__ import annotations

from typing import Any, Iterator

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError, InterpolationToMissingValueError, OmegaConfBaseException
from omegaconf.nodes import AnyNode, BooleanNode, StringNode, ValueNode

from sweep.config.view import HYDRA_NOT_SET, unresolved
from sweep.preflight.refusal import CONFIG_ERROR, Refusal


def check_interpolations(config: DictConfig, label: str = "") -> None:
    """Refuse (exit 2) a `hydra.*` key the command set whose interpolation does not resolve, named as set; and an
    interpolation into a typed field of the job's config (or hydra.launcher's) that resolves to what the field
    would have to convert: a bool field takes a boolean (or the text true/false), as its command-line value does
    (sweep.preflight.command.check_typed_values); a str field takes no boolean; any other typed field, a value of
    its type. `label`: the sweep's job, named in the refusal."""
    try:
        _check(config)
    except Refusal as e:
        raise Refusal(e.line.replace(CONFIG_ERROR, f"config error in job {label}: ", 1)) if label else e from None


def _check(config: DictConfig) -> None:
    given = OmegaConf.select(config, "hydra.overrides", default=None)  # (as written: a value may be `${oops}`)
    for line in OmegaConf.to_container(given, resolve=False).get("hydra", ()) if given is not None else ():
        key = str(line).lstrip("+~").partition("=")[0]
        try:
            OmegaConf.select(config, key)
        except InterpolationToMissingValueError:
            pass  # (a key Hydra sets as the job starts: hydra.runtime.output_dir)
        except InterpolationResolutionError as e:
            if HYDRA_NOT_SET in str(e):  # `${hydra:...}`: Hydra's to resolve as the job starts
                continue
            raise Refusal.config_error(unresolved(config, e, key)) from None
    untyped = None  # the config as plain values: an interpolation resolved to what it reads, not converted
    launcher = OmegaConf.select(config, "hydra.launcher", default=None)
    typed = [*_interpolated(config), *(_interpolated(launcher, "hydra.launcher.") if launcher is not None else ())]
    for key, node in typed:
        if untyped is None:
            untyped = OmegaConf.create(OmegaConf.to_container(config, resolve=False))
        try:
            raw = OmegaConf.select(untyped, key)
            OmegaConf.select(config, key)  # converted to the field's type, as the job will read it
        except InterpolationToMissingValueError:
            continue
        except OmegaConfBaseException as e:
            if HYDRA_NOT_SET in str(e):  # `${hydra:job.override_dirname}`: the job's own, as it starts
                continue
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise Refusal.config_error(f"{key}={node._value()} cannot be resolved: {reason}") from None
        allowed = _allowed(node, raw)
        if allowed:
            raise Refusal.config_error(
                f"{key}={node._value()} resolves to {raw!r}, which is not allowed: expected {allowed}"
            )


def _allowed(node: ValueNode, raw: Any) -> str:
    """What the field `node` takes, where `raw` is not that ("" where it is)."""
    if isinstance(node, BooleanNode):
        ok = isinstance(raw, bool) or (isinstance(raw, str) and raw.lower() in ("true", "false"))
        return "" if ok or raw is None else "true or false (an interpolation that resolves to a boolean)"
    if isinstance(node, StringNode) and isinstance(raw, bool):
        return "text (a boolean would be written 'True' or 'False')"
    return ""


def _interpolated(node: Any, prefix: str = "") -> Iterator[tuple[str, ValueNode]]:
    """(dotted key, node) of each typed value in the job's config (not Hydra's; the launcher's settings are walked
    on their own) written as an interpolation."""
    if isinstance(node, DictConfig):
        keys: Any = [k for k in node.keys() if prefix or k != "hydra"]
    elif isinstance(node, ListConfig):
        keys = range(len(node))
    else:
        return
    for k in keys:
        child = node._get_node(k)
        key = f"{prefix}{k}"
        if isinstance(child, (DictConfig, ListConfig)) and not child._is_interpolation():
            yield from _interpolated(child, f"{key}.")
        elif isinstance(child, ValueNode) and child._is_interpolation() and not isinstance(child, AnyNode):
            yield key, child
