"""Hydra's composition errors as the project's one line: an option that does not exist, a key the node does not
have, a value of the wrong type, an override Hydra cannot parse. Hydra reports these in several lines (with its
config search path, or advice to add the key with `+`); while the command composes, Hydra raises them to
`python -m sweep`'s main instead (Hydra's own HYDRA_FULL_ERROR switch), which says them here: the field, what is
allowed, and the closest names for a misspelling. Once the job runs, Hydra reports its failures its own way."""

from __future__ import annotations

import dataclasses
import os
import re
from contextlib import contextmanager
from typing import Iterator, Optional

from hydra.errors import (
    CompactHydraException,
    ConfigCompositionException,
    MissingConfigException,
    OverrideParseException,
)
from omegaconf import DictConfig
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    ConfigTypeError,
    OmegaConfBaseException,
    ValidationError,
)

from hydra_plugins.sweep_launcher import api
from hydra_plugins.sweep_launcher.api import this_command
from sweep.config.schema import JOB_GROUPS, SCHEMAS, DeviceConfig
from sweep.config.suggest import expected
from sweep.preflight.refusal import Refusal

RAISE = "HYDRA_FULL_ERROR"  # set: Hydra raises an error to its caller rather than reporting it itself
_raised_by_us = False  # RAISE was set here (a user's own setting is kept, and Hydra's full report with it)

# OmegaConf's names for a field's type in its conversion error -> what the field takes
TYPES = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false", "String": "a string"}


@contextmanager
def composition_refused() -> Iterator[None]:
    """Around Hydra's main: a composition error raised out of it becomes a `Refusal` (exit 2, one line)."""
    global _raised_by_us
    _raised_by_us = RAISE not in os.environ
    if _raised_by_us:
        os.environ[RAISE] = "1"
    try:
        yield
    except CompactHydraException as e:
        refusal = explain(e) if _raised_by_us else None
        if refusal is None:
            raise
        raise refusal from None
    finally:
        composed()


def composed() -> None:
    """The job starts (a single run's task, or Hydra's basic launcher's): Hydra reports from here as it would."""
    global _raised_by_us
    if _raised_by_us:
        os.environ.pop(RAISE, None)
        _raised_by_us = False


def explain(e: BaseException) -> Optional[Refusal]:
    """The one line for a composition error (None: not one this knows)."""
    cause = e.__cause__
    if isinstance(e, MissingConfigException) and e.options is not None and e.missing_cfg_file:
        group, _, option = e.missing_cfg_file.rpartition("/")
        return Refusal.config_error(f"{group}={option} is not an option of {group}: {expected(option, e.options)}")
    if isinstance(e, OverrideParseException):
        why = str(e.message).splitlines()[0]  # (then a link to Hydra's grammar)
        key, _, value = str(e.override).partition("=")
        # a value that is no list or dict but holds Hydra's brackets (an IPv6 address: http://[::1]:5000) is read
        # as one only quoted; the shell's quotes around it go first
        quote = value and value[0] not in "[{'\"" and re.search(r"[\[\]{}()]", value)
        hint = f" (quote a value that holds brackets: '{key}=\"{value}\"')" if quote else ""
        function = re.match(r"(\w+)\(", value)
        if function and function.group(1) in SWEEP_FUNCTIONS:  # `range()`: its forms, not a quoted text
            hint = f" (expected {SWEEP_FUNCTIONS[function.group(1)]})"
        if not value.isascii() and value[:1] not in "'\"":  # Hydra's grammar reads only ASCII unquoted
            hint = f" (quote a value that is not ASCII: '{key}=\"{value}\"')"
        if value.startswith("~"):  # the shell expands no ~ after `a.b=` (not a variable's name): Hydra's lexer meets it
            # ~/... is $HOME/...; ~alice/... another user's home, which only the quoted form keeps
            home = f"{key}=$HOME{value[1:]}, or " if value == "~" or value.startswith("~/") else ""
            hint = f" (a ~ after {key}= is not expanded by the shell: write {home}'{key}=\"{value}\"')"
        shown = str(e.override)
        if not shown.isprintable():  # a line break (a pasted value) would break the one line in two
            shown = f"{key}={value!r}".replace(f"{key}='", f"{key}=", 1)[:-1] if value else repr(shown)
            why = why.partition(": ")[0]  # (Hydra's words after it repeat the override as given)
            hint = " (a line break or another control character is read only inside quotes)"
        return Refusal.config_error(f"{shown} is not an override Hydra can read: {why}{hint}")
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and cause.full_key:
        append = re.search(r"To append to your config use (\+\S+)", str(e))  # the override, with its value
        return unknown_key(cause, append.group(1) if append else f"+{cause.full_key}=...")
    # a preset's file setting a key that the option chosen on the command line lacks (`sweeps=tiled_w1
    # method=gf2`: tiled_w1 sets method.lr): Hydra raises it during the merge's error, not from it
    in_file = re.match(r"In '([^']+)': ConfigKeyError raised while composing", str(e))
    context = e.__context__
    if in_file and isinstance(context, ConfigKeyError) and dataclasses.is_dataclass(context.object_type):
        node, _, key = str(context.full_key).rpartition(".")
        option, keys = _option(node, context.object_type)
        return Refusal.config_error(
            f"{in_file.group(1)}.yaml sets {context.full_key}, which {option} does not have (its keys: "
            f"{', '.join(sorted(keys)) or 'none'}): that option does not fit this preset's runs"
        )
    if isinstance(cause, (ValidationError, ConfigTypeError)) and cause.full_key:
        return wrong_type(str(e), cause)
    # a sweep's values without -m: `a=1,2` (Hydra: ambiguous, it may be a list) or `a=range(3)`
    swept = re.match(r"(Ambiguous value for argument|Sweep parameters) '(.+)'", str(e))  # (a value may hold ')
    if isinstance(e, ConfigCompositionException) and swept:
        return values_without_multirun(swept.group(2), comma_list=swept.group(1).startswith("Ambiguous"))
    # `+extra.a@b=1`: '@' names the package a group's option goes to, so Hydra took it for a group's (a traceback)
    no_group = re.match(r"Override (\S+) looks like a config group override, but config group '([^']+)'", str(e))
    if isinstance(e, ConfigCompositionException) and no_group:
        override, group = no_group.groups()
        return Refusal.config_error(
            f"{override} is read as a config group's choice ('@' names where it goes), and there is no group "
            f"{group}: a key's name takes no '@'; the groups: {', '.join(sorted(CHOICES))}"
        )
    # `+problem.n_bits=5` adds a key that is there; `~extra.note` (or a key whose value is null) removes one that is
    # not: Hydra's traceback, exit 1
    there = re.match(r"Could not append to config\. An item is already at '([^']+)'", str(e))
    if isinstance(e, ConfigCompositionException) and there:
        return Refusal.config_error(
            f"+{there.group(1)} adds a key that is already there: set it as {there.group(1)}=..."
        )
    gone = re.match(r"Could not delete from config\. '([^']+)' does not exist", str(e))
    if isinstance(e, ConfigCompositionException) and gone:
        return Refusal.config_error(f"~{gone.group(1)} removes a key that is not set: leave it out")
    hydras = re.match(r"Sweeping over Hydra's configuration is not supported : '(.+)'", str(e))
    if isinstance(e, ConfigCompositionException) and hydras:  # `hydra.job.name=a,b -m`: Hydra's traceback
        override = hydras.group(1)
        key, _, values = override.lstrip("+~").partition("=")
        params = key.startswith("hydra.sweeper.params.")
        swept = key.removeprefix("hydra.sweeper.params.")
        how = f"sweep the key itself: {swept}={values} -m" if params else "give it one value"
        return Refusal.config_error(f"{override} sweeps a setting of Hydra's, which takes one value a command: {how}")
    not_chosen = re.match(r"Could not override '([\w/]+)'\.", str(e))  # a group the defaults list has not
    if isinstance(e, ConfigCompositionException) and not_chosen:
        return not_a_choice(not_chosen.group(1))
    return None


# Hydra's sweep functions, as its grammar takes them (hydra.cc: Extended Override syntax)
SWEEP_FUNCTIONS = {
    "choice": "choice(a,b,...): one value or more",
    "range": "range(stop), range(start,stop) or range(start,stop,step): numbers",
    "interval": "interval(low,high): two numbers, a search's (hydra/sweeper=optuna)",
    "glob": "glob(pattern) or glob(include=[...],exclude=[...]): a group's options",
    "shuffle": "shuffle(a,b,...) or shuffle(a sweep)",
    "sort": "sort(a,b,...) or sort(a sweep, reverse=true)",
    "tag": "tag(name,...,a sweep)",
}
CHOICES = (*JOB_GROUPS, "sweeps")  # the groups a command chooses an option of (conf/config.yaml's defaults)
# groups of conf/ that no command chooses: what reads them instead
READ_BY = {"energy": "tracker=energy tracker.hierarchy=<cpu|gpu>", "prices": "hydra.launcher.modal.prices=<file>"}


def not_a_choice(group: str) -> Refusal:
    """`energy=gpu`: a group of conf/ (or a misspelt one) that a job does not choose an option of."""
    if group in READ_BY:
        return Refusal.config_error(
            f"{group} is not a group a job chooses (its options are read by {READ_BY[group]}): "
            f"expected one of {', '.join(sorted(CHOICES))}"
        )
    return Refusal.config_error(f"{group} is not a group a job chooses: {expected(group, CHOICES)}")


def values_without_multirun(override: str, comma_list: bool) -> Refusal:
    """`problem.seed=1,2` with no `-m`: the sweep it asks for, as a command; or the list it may have meant."""
    key, _, values = override.partition("=")
    listed = f" (a list value is written {key}=[{values}])" if comma_list and "." in key else ""  # (not a group's)
    return Refusal.config_error(
        f"{override} is a sweep over {key}'s values, which needs -m: {this_command('-m')}{listed}"
    )


def unknown_key(cause: OmegaConfBaseException, append: str = "") -> Optional[Refusal]:
    """`method.lrr=0.1`: the key is not a field of the node's schema; the node named as its option where it is a
    job group's (`method=sgd`)."""
    schema = cause.object_type
    if not dataclasses.is_dataclass(schema):  # a preset's free-form node (compare.baseline: dotted keys of its own)
        parent = getattr(cause, "parent_node", None)
        if not isinstance(parent, DictConfig) or not cause.full_key:
            return None
        node, _, key = str(cause.full_key).rpartition(".")
        if not len(parent):  # `extra.note=x`: a key of the user's own is added with a +
            return Refusal.config_error(
                f"{cause.full_key} is not a key of {node}: a key of your own is added with a +: {append}"
            )
        return Refusal.config_error(f"{cause.full_key} is not a key of {node}: {expected(key, list(parent.keys()))}")
    node, _, key = str(cause.full_key).rpartition(".")
    option, keys = _option(node, schema)
    if not node:  # a top-level key (`metod=sgd`, `sweep=tiled_w1`): the config's keys and the presets' group
        return Refusal.config_error(f"{key} is not a key of the config: {expected(key, [*keys, 'sweeps'])}")
    if not keys:  # Hydra's basic launcher: a schema with no keys of its own (an empty "expected one of")
        own = [f.name for f in dataclasses.fields(api.SweepLauncherConf)] if node == "hydra.launcher" else []
        elsewhere = f" ({key} is a key of hydra/launcher=sweep, the project's launcher)" if key in own else ""
        return Refusal.config_error(f"{cause.full_key} is not a key of {option}, which takes none{elsewhere}")
    return Refusal.config_error(f"{cause.full_key} is not a key of {option}: {expected(key, keys)}")


def _option(node: str, schema: type) -> tuple[str, list[str]]:
    """`method=sgd` for the node `method` and its schema, and the schema's own keys."""
    option = next((f"{node}={name}" for name, s in SCHEMAS.get(node, {}).items() if s is schema), node)
    return option, [f.name for f in dataclasses.fields(schema) if f.name not in ("_target_", "name")]


def wrong_type(message: str, cause: ValidationError) -> Refusal:
    """`method.hidden=abc`: the value does not convert to the field's type. Also a null (`problem.n_bits=null`) or
    a list or mapping (`mlflow.experiment=[a,b]`) for a field that takes neither, and `~problem.n_bits`, which
    would remove a field of the schema: OmegaConf's words for these ("field 'problem.n_bits' is not Optional",
    "Cannot convert 'list' to string", "... does not support deletion") named no allowed value."""
    override = message.partition("Error merging override ")[2]
    if override.startswith("~") and "does not support deletion" in str(cause.msg):
        return Refusal.config_error(
            f"{override} would remove {cause.full_key}, a field every job has: set it instead "
            f"({cause.full_key}=<value>, expected {_takes(cause) or 'a value of its type'})"
        )
    value = message.partition("=")[2] if message.startswith("Error merging override") else "?"
    m = re.search(r"could not be converted to (\w+)|is not a valid (bool)\b", str(cause.msg))
    name = m and (m.group(1) or "Boolean")  # (OmegaConf words a boolean's error apart)
    allowed = TYPES.get(name, name) if name else str(cause.msg).splitlines()[0]
    if re.match(r"field '[^']+' is not Optional|Cannot convert '(list|dict)' to string", str(cause.msg)):
        allowed = _takes(cause) or allowed
        allowed += " (it takes no null)" if value == "null" else ""
    if "is not a ListConfig" in str(cause.msg):  # (OmegaConf's words for a list field given a single value)
        allowed = f"a list, written {cause.full_key}=[{','.join(map(str, _default(cause) or ['...']))}]"
    if "to Dict[" in str(cause.msg) or "merge DictConfig with" in str(cause.msg):  # a mapping given one value, a list
        allowed = f"a mapping, set key by key: +{cause.full_key}.<key>=<value>"
    return Refusal.config_error(f"{cause.full_key}={value} is not allowed: expected {allowed}")


def _takes(cause: OmegaConfBaseException) -> Optional[str]:
    """What the field `cause` names takes: its value rule's words, where the class that owns it declares one
    (sweep.config.fields), else its type's (None: neither is known)."""
    from hydra.utils import get_class  # noqa: PLC0415 - Hydra's: imported by then

    from sweep.config.check import DEVICE_RULES  # noqa: PLC0415 - the check's modules: only for this refusal

    schema, key = cause.object_type, str(cause.full_key)
    source = getattr(schema, "source_class", None)
    rules = DEVICE_RULES if schema is DeviceConfig else getattr(get_class(source), "field_rules", ()) if source else ()
    rule = next((r for r in rules if r.field == key), None)
    if rule is not None:
        return rule.allowed
    if not dataclasses.is_dataclass(schema):
        return None
    f = next((f for f in dataclasses.fields(schema) if f.name == key.rpartition(".")[2]), None)
    kind = str(f.type if f is None or isinstance(f.type, str) else getattr(f.type, "__name__", ""))
    if kind.startswith(("list", "List")):
        return f"a list, written {key}=[{','.join(map(str, _default(cause) or ['...']))}]"
    if kind.startswith(("dict", "Dict")):
        return f"a mapping, set key by key: +{key}.<key>=<value>"
    return {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string"}.get(kind)


def _default(cause: ValidationError) -> Optional[list]:
    """The schema's default of the field `cause` names (a list field's, as an example of the form), if it has one."""
    schema, key = cause.object_type, str(cause.full_key).rpartition(".")[2]
    if not dataclasses.is_dataclass(schema):
        return None
    f = next((f for f in dataclasses.fields(schema) if f.name == key), None)
    return f.default_factory() if f is not None and f.default_factory is not dataclasses.MISSING else None
