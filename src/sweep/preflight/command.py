"""The command line, before Hydra composes anything: what can be refused from the arguments alone, and `-m`
accepted wherever it stands (Hydra's own parser takes no override after it: `sweep method=a,b -m x=1` would
fail, and every hint the project prints appends an override to the command)."""

from __future__ import annotations

import dataclasses
import math
import os
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any, NoReturn

from hydra_plugins.sweep_launcher.api import command, this_command
from sweep.arguments import meant
from sweep.config.memory import check_grid
from sweep.config.schema import JOB_GROUPS, Config, config_typed_fields, typed_fields
from sweep.config.suggest import closest, expected
from sweep.errors import ConfigError
from sweep.paths import CONF_DIR, SWEEPS_DIR, preset_file
from sweep.preflight.refusal import Refusal

MULTIRUN_FLAGS = ("-m", "--multirun")


def presets() -> list[str]:
    """The sweep presets: `sweeps/<name>.yaml` at the project root."""
    return sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml"))


def multirun_first(argv: list[str]) -> list[str]:
    """`argv` with `-m`/`--multirun` moved to the front: Hydra then reads every override wherever the flag was."""
    flags = [a for a in argv if a in MULTIRUN_FLAGS]
    return flags[:1] + [a for a in argv if a not in MULTIRUN_FLAGS] if flags else list(argv)


def check_unknown_preset(argv: list[str]) -> None:
    """`sweeps` is an optional config group, so Hydra skips an option it cannot find and runs the default job:
    an unknown preset (a typo) is refused here, before anything is composed or run. So are two presets in one
    command: each is a sweep of its own, and Hydra would run one job of each (the presets' sweeps ignored) into
    the first one's study."""
    given = []  # (the argument, its presets): `sweeps=a sweeps=b` is two presets as much as `sweeps=a,b` is
    for arg in argv:
        key, eq, value = arg.lstrip("+~").partition("=")
        if key == "sweeps" and eq and "(" not in value:
            given.append((arg, [v.strip() for v in value.strip("[]").split(",")]))
    names = [n for _, ns in given for n in ns]
    unknown = [v for v in names if not preset_file(v)]
    if unknown:
        raise Refusal.config_error(f"sweeps={unknown[0]} is not a preset: {expected(unknown[0], presets())}")
    if len(names) > 1:
        one_each = ", then ".join(this_command(f"sweeps={n}") for n in names)
        said = " ".join(arg for arg, _ in given)
        raise Refusal.config_error(
            f"{said} names {len(names)} presets: each is a sweep of its own, one a command: {one_each}"
        )


def check_unused_additions(argv: list[str]) -> None:
    """`+key=value` at the top level adds a key no job reads, so it would be recorded nowhere: refused. Free-form
    keys belong under `extra` (`+extra.note=...`): part of the job's identity, recorded as params. So is a key
    added to one of the config's own sections (`+mlflow.experimnet=x`: Hydra's `+` adds past the schema, and the
    runs went to 'sweep'); a job group's added key is the job check's (sweep.config.check)."""
    known = {f.name for f in fields(Config)} | {"sweeps", "hydra"}
    hints = typing.get_type_hints(Config)
    sections = {k: t for k, t in hints.items() if dataclasses.is_dataclass(t) and k not in JOB_GROUPS}
    for arg in argv:
        if not arg.startswith("+") or "=" not in arg:
            continue
        key = arg.lstrip("+").split("=", 1)[0]
        top = key.split("@", 1)[0].split("/", 1)[0].split(".", 1)[0]
        if top not in known:
            raise Refusal.config_error(
                f"{arg} is not read by any job: put free-form keys under extra "
                f"(+extra.{key}=..., recorded as a param), or set one of {', '.join(sorted(known))}"
            )
        name = key.partition(".")[2].partition(".")[0]
        if top in sections and name:
            keys = [f.name for f in fields(sections[top])]
            if name not in keys:
                raise Refusal.config_error(f"{top}.{name} is not a key of {top}: {expected(name, keys)}")


def check_grid_params(argv: list[str]) -> None:
    """`hydra.sweeper.params.problem.seed=1,2`: Hydra's basic sweeper, chosen by no preset, has no params node to
    set a key in (OmegaConf's AssertionError's traceback, a sweep's values or not); its grid is the command's own
    sweep. A preset's or a search's params are theirs."""
    if any(a.startswith(("sweeps=", "hydra/sweeper=", "+hydra/sweeper=")) for a in argv):
        return
    for arg in argv:
        key, eq, values = arg.lstrip("+~").partition("=")
        if key == "hydra.sweeper.params" or key.startswith("hydra.sweeper.params."):
            swept = key.removeprefix("hydra.sweeper.params").lstrip(".") or "<key>"
            raise Refusal.config_error(
                f"{arg} sets the basic sweeper's params, which only a preset's file sets: sweep the key itself, "
                f"{swept}={values.strip(chr(39) + chr(34)) if swept != '<key>' else '<values>'} -m"
            )


def check_removals(argv: list[str]) -> None:
    """`~mlflow`, `~run_name`: a section or key of the config every job reads, removed. Hydra removed a section (the
    job's store check then failed in three lines, exit 1) and refused a null key in its traceback; a key within a
    section is OmegaConf's to refuse (sweep.preflight.composition), and a job group's `check_group_choices`."""
    for arg in argv:
        key, eq, _ = arg.partition("=")
        if arg.startswith("~") and key[1:] in {f.name for f in fields(Config)} - set(JOB_GROUPS):
            raise Refusal.config_error(
                f"{key} would remove {key[1:]}, which every job's config has: set it instead ({key[1:]}=<value>, "
                "or leave it out for its default)"
            )


def check_repeated_keys(argv: list[str]) -> None:
    """`method=gf2 method=km`: Hydra runs the last option alone, silently (a sweep over both is `method=gf2,km
    -m`). Only a config group's choice (a key with no dot): a value given twice keeps Hydra's rule, the last wins,
    which scripts and wrappers rely on to replace a default they pass first (`... problem.n_bits=10` then the
    user's `problem.n_bits=11`). The same option twice is harmless."""
    seen: dict[str, str] = {}
    for arg in argv:
        key, eq, value = arg.lstrip("+~").partition("=")
        if not eq or arg.startswith("-") or "." in key:
            continue
        if key in seen and seen[key] != arg:
            first = seen[key].partition("=")[2]
            raise Refusal.config_error(
                f"{key} is given twice ({seen[key]} {arg}), and only the last would run: give it once (a sweep "
                f"over both: {key}={first},{value} -m)"
            )
        seen[key] = arg


def options(group: str) -> list[str]:
    """A group's options: conf/<group>/*.yaml for a job group, the presets for `sweeps`, and for Hydra's own groups
    (hydra/launcher...) what Hydra's config search path holds, its plugins' included (read only for a refusal)."""
    if group == "sweeps":
        return presets()
    if not group.startswith("hydra/"):
        return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
    from hydra import initialize_config_dir  # noqa: PLC0415 - Hydra's plugin scan: only on the way to a refusal
    from hydra.core.global_hydra import GlobalHydra  # noqa: PLC0415
    from hydra.core.singleton import Singleton  # noqa: PLC0415

    if GlobalHydra.instance().is_initialized():  # (a process that composes on: its own search path)
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))
    state = Singleton.get_state()  # Hydra's global state put back after: its version base, which sets job.chdir's
    try:  # default for whatever the process composes next (an in-process caller: a test, a notebook)
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            return sorted(GlobalHydra.instance().config_loader().get_group_options(group))
    finally:
        Singleton.set_state(state)


def check_group_choices(argv: list[str]) -> None:
    """A group takes one option: `method=null`, `method=[sgd,km]`, `~method` and `+method=km` would leave it none or
    several; so would `hydra/launcher=null` or `~hydra/launcher`. Hydra raised these as a ValueError's or a
    ConfigCompositionException's traceback, or (`~method`) ran the job without the group, which failed with
    tracebacks after its store was made. `sweeps` is optional: removing it (`~sweeps`) is no preset, as leaving it
    out is; null is an unknown preset (`check_unknown_preset`)."""
    for arg in argv:
        if arg.startswith("-") or arg.startswith("++"):
            continue
        key, eq, value = arg.lstrip("+~").partition("=")
        group = key.partition("@")[0]
        optional = group == "sweeps"
        if group not in JOB_GROUPS and not group.startswith("hydra/") and not optional:
            continue
        why = ""
        if arg.startswith("~") and not optional:
            why = f"{arg} would remove {group}, and every job takes one of its options"
        elif arg.startswith("+") and optional:
            why = f"{arg}: a preset is chosen, not added: {arg[1:]} chooses it"
        elif arg.startswith("+"):
            why = f"{arg} would add a second {group}, and a job takes one: {arg[1:]} chooses it"
        elif "@" in key:  # Hydra: "Could not override 'problem@x'", a traceback
            why = f"{arg} would put {group}'s option elsewhere ('@' names where), and every job reads it as {group}"
        elif eq and value.replace(" ", "") in ("null", "~", "[]", "{}") and not optional:
            why = f"{arg} chooses no option of {group}, and every job takes one"
        elif eq and value.replace(" ", "") == "[]":  # (sweeps: optional)
            why = f"{arg} names no preset: leave sweeps out for a job of conf/config.yaml"
        elif eq and value.startswith("{") and group.startswith("hydra/"):  # (a job group's: keys merged into it)
            why = f"{arg} is a mapping, and {group} takes an option's name"
        elif eq and value.startswith("[") and value.endswith("]") and "," not in value:  # Hydra: a list of one
            why = f"{arg} is a list, and {group} takes one option: {group}={value.strip('[] ')} chooses it"
        elif eq and value.startswith("[") and value.endswith("]") and not optional:  # (presets: one a command)
            sweep = f"{group}={value.strip('[]')} -m"
            why = f"{arg} chooses several options of {group}, and a job takes one (a sweep over them: {sweep})"
        if why:
            raise Refusal.config_error(f"{why}: expected one of {', '.join(options(group))}")


def check_grid_size(argv: list[str]) -> None:
    """A sweep's grid whose jobs would not fit in memory before the first starts (`'problem.seed=range(0,10**8)'`):
    refused before Hydra lists them (sweep.config.memory.check_grid). Only the basic sweeper's grid: a search
    (hydra/sweeper=optuna) draws its trials one by one."""
    if argv[:1] not in (["-m"], ["--multirun"]) or any(a.startswith("hydra/sweeper=") for a in argv):
        return
    swept = [a for a in argv if not a.startswith("-") and ("," in a or "range(" in a)]
    if not swept:
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415 - a sweep's only
    from hydra.core.override_parser.types import ChoiceSweep, RangeSweep  # noqa: PLC0415 - (Hydra's own parser)
    from hydra.errors import HydraException  # noqa: PLC0415

    try:
        overrides = OverridesParser.create().parse_overrides(swept)
    except HydraException:
        return  # a line Hydra cannot read: its own refusal says why (sweep.preflight.composition)
    values: dict[str, int] = {}
    for o in overrides:
        v = o.value() if o.is_sweep_override() else None
        if isinstance(v, ChoiceSweep):
            values[o.key_or_group] = len(v.list)
        elif isinstance(v, RangeSweep) and v.step:
            values[o.key_or_group] = max(0, math.ceil((v.stop - v.start) / v.step))
    try:
        check_grid(values)
    except ConfigError as e:
        raise Refusal.config_error(str(e)) from None


def _typed_fields(kind: type) -> dict[str, bool]:
    """The fields typed `kind` a command line may set: the job's config's, and the project's launcher's
    (hydra.launcher.*)."""
    from hydra_plugins.sweep_launcher.api import SweepLauncherConf  # noqa: PLC0415 - (its modal section within)

    return {**config_typed_fields(kind), **typed_fields("hydra.launcher", [SweepLauncherConf], kind)}


def check_typed_values(argv: list[str]) -> None:
    """What OmegaConf would convert into something else than was typed, refused here before Hydra converts it (each
    value of a sweep too). A bool field takes true or false: OmegaConf reads any integer but 0 as true, and yes,
    on or y too (`mlflow.force=2` re-ran a recorded job, `device.local_gpu=1` was on). A str field takes text:
    Hydra reads `true` as a boolean and `1e3` as a number, which OmegaConf writes back as 'True' and '1000.0'
    (`mlflow.experiment=true` recorded into an experiment named True). An interpolation (${...}) is checked once it
    resolves (sweep.preflight.interpolations)."""
    bools, strs = _typed_fields(bool), _typed_fields(str)
    candidates = [a for a in argv if not a.startswith("-") and "=" in a]
    candidates = [a for a in candidates if a.lstrip("+~").partition("=")[0] in bools.keys() | strs.keys()]
    if not candidates:
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415 - (Hydra's own parser)
    from hydra.core.override_parser.types import ChoiceSweep, QuotedString  # noqa: PLC0415
    from hydra.errors import HydraException  # noqa: PLC0415

    parser = OverridesParser.create()
    for arg in candidates:
        try:
            override = parser.parse_override(arg)
        except HydraException:
            continue  # a line Hydra cannot read: its own refusal says why (sweep.preflight.composition)
        if override.is_delete():
            continue
        key = override.key_or_group
        value = override.value()
        written = arg.partition("=")[2]
        swept = isinstance(value, ChoiceSweep)
        # a sweep's quoted value is Hydra's QuotedString, a plain one its text; each value as typed, where the
        # sweep is a plain a,b,c
        values = [v.text if isinstance(v, QuotedString) else v for v in value.list] if swept else [value]
        texts = written.split(",") if swept else [written]
        texts = texts if len(texts) == len(values) else [None] * len(values)
        texts = [None if t is None or t[:1] in "'\"" else t for t in texts]  # (a quoted one: its text, `v`)
        for v, text in zip(values, texts):
            shown = (v if text is None else text) if swept else written
            if key in bools:
                _check_bool(key, v, shown, bools[key])
            elif isinstance(v, (bool, int, float)) and str(v) != (text if text is not None else str(v).lower()):
                kind = "a boolean" if isinstance(v, bool) else "a number"
                raise Refusal.config_error(
                    f"{key}={shown} is read as {kind} and would be written {str(v)!r}: expected text; quote it to "
                    f"keep it as typed: '{key}=\"{shown}\"'"
                )


def _check_bool(key: str, v: Any, shown: Any, nullable: bool) -> None:
    """One value for the bool field `key` (see check_typed_values)."""
    if isinstance(v, bool) or (v is None and nullable) or (isinstance(v, str) and v.startswith("${")):
        return
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return
    allowed = "true or false" + (" or null" if nullable else "")
    near = closest(v, ("true", "false")) if isinstance(v, str) else []
    meant = f"did you mean {near[0]}? " if near else ""
    raise Refusal.config_error(f"{key}={shown} is not allowed: {meant}expected {allowed}")


def check_flags(argv: list[str]) -> None:
    """A misspelt flag (`--multrun`, `-M`, `--cfg jbo`) is one line with the one meant, where Hydra's parser prints
    its usage block and a line that names none (the flags are Hydra's: its own parser reads them here)."""
    if "--version" in argv or "--shell-completion" in argv:  # Hydra's parser answers these itself, then exits
        return
    from hydra._internal.utils import get_args_parser  # noqa: PLC0415 - argparse's parser, built in microseconds

    parser = get_args_parser()

    def refuse(message: str) -> NoReturn:
        raise Refusal(f"{message}{meant(parser, message)} (see {command('sweep')} --help)")

    parser.error = refuse  # type: ignore[method-assign]
    args = parser.parse_intermixed_args(argv)  # the flags alone: where they stand is Hydra's to say
    modes = [f"--{m}" for m in ("run", "multirun", "cfg", "info", "shell_completion") if getattr(args, m, None)]
    if len(modes) > 1:  # Hydra's rule, which it raises as a ValueError's traceback after its imports
        raise Refusal(f"{' and '.join(modes)} given together: one of --run, --multirun, --cfg, --info at a time")


def check_config_flags(argv: list[str]) -> None:
    """Hydra's -cp/--config-path, -cd/--config-dir and -cn/--config-name name folders and a file that must be there:
    a folder that is not, a relative -cp (Hydra reads it as a module beside the sweep package, not from the working
    directory) and a primary config that is not in its folder were Hydra's traceback or its search path in a dozen
    lines, exit 1; a group's option as the primary config (-cn method/sgd) composed and failed in the job."""
    from hydra._internal.utils import get_args_parser  # noqa: PLC0415 - argparse's parser, built in microseconds

    args = get_args_parser().parse_intermixed_args(argv)
    dirs = [CONF_DIR]
    if args.config_dir is not None:
        if not os.path.isdir(args.config_dir):
            raise Refusal(f"--config-dir {args.config_dir} is not a directory: expected a folder of configs to add")
        dirs.append(Path(args.config_dir))
    if args.config_path is not None and "://" not in args.config_path:  # (pkg:// and file:// are Hydra's to read)
        where = Path(args.config_path)
        if not where.is_absolute():
            here = f": -cp {where.resolve()}" if where.resolve().is_dir() else ""
            raise Refusal(
                f"-cp {args.config_path} is relative, and Hydra reads a relative config path beside the sweep package, "
                f"not from the working directory: expected an absolute path{here}"
            )
        if not where.is_dir():
            raise Refusal(f"-cp {args.config_path} is not a directory: expected the folder of the primary config")
        dirs[0] = where
    name = args.config_name or "config"  # (the entrypoint's, conf/config.yaml; a -cp folder must hold one too)
    stem = name.removesuffix(".yaml")
    if "/" in stem or not any((d / f"{stem}.yaml").is_file() for d in dirs):
        primaries = sorted({p.stem for d in dirs for p in d.glob("*.yaml")})
        if not args.config_name:
            others = f"-cn <one of {', '.join(primaries)}>" if primaries else "a folder that holds one (it holds none)"
            folder = f"-cp {args.config_path}" if args.config_path else f"{CONF_DIR} (the project's conf/)"
            root = (
                f"; SWEEP_ROOT={os.environ['SWEEP_ROOT']} names the project's root"
                if "SWEEP_ROOT" in os.environ
                else ""
            )
            raise Refusal(f"{folder} holds no config.yaml, the primary config read: expected {others}{root}")
        raise Refusal(
            f"-cn {name} is not a primary config of {', '.join(map(str, dirs))}: {expected(stem, primaries)} (a "
            "group's option is chosen as group=option)"
        )


def check_key_lengths(argv: list[str]) -> None:
    """A key longer than MLflow keeps a param's name: `+extra.<300 characters>=1` was Hydra's traceback (`File name
    too long`: it looks for a config group of that name), and 246 ran the job, whose result no store took (it
    stayed in the spool, failing again at every later command)."""
    from sweep.record.sqlite.writer import MAX_KEY_LEN  # noqa: PLC0415 - MLflow's limit, written once there

    for arg in argv:
        key, eq, _ = arg.lstrip("+~").partition("=")
        key = key.partition("@")[0]
        if eq and not arg.startswith("-") and len(key) > MAX_KEY_LEN:
            raise Refusal.config_error(
                f"{key[:40]}... ({len(key)} characters) is too long: expected a key of at most {MAX_KEY_LEN} "
                f"characters (MLflow's limit for a param's name)"
            )


def check_command(argv: list[str]) -> list[str]:
    """Raise Refusal for what the arguments alone show to be bad input; return them as Hydra should read them."""
    check_flags(argv)
    check_config_flags(argv)
    argv = multirun_first(argv)
    check_key_lengths(argv)
    check_group_choices(argv)  # (before the preset's check: `sweeps=[a,b]` is a list, not a preset "[a")
    check_unknown_preset(argv)
    check_repeated_keys(argv)
    check_grid_size(argv)
    check_typed_values(argv)
    check_unused_additions(argv)
    check_removals(argv)
    check_grid_params(argv)
    return argv
