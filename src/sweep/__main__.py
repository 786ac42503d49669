"""`python -m sweep`: the one train entrypoint. Config groups: problem, method, variant, device, tracker."""

from __future__ import annotations

import sys
from dataclasses import fields

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import ConfigCompositionException, OverrideParseException
from hydra.types import RunMode
from omegaconf import DictConfig

from hydra_plugins.sweep_launcher._signals import as_interrupted, check_pending, listen
from sweep.config.schema import Config, register_configs
from sweep.errors import ConfigError
from sweep.paths import CONF_DIR, SWEEPS_DIR
from sweep.record.tags import REPEAT_OF_TAG
from sweep.result import RunResult

register_configs()


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def task(cfg: DictConfig) -> RunResult | None:
    from sweep import job  # noqa: PLC0415 - the job's modules: when Hydra runs the task, after composition

    # after Hydra's plugin scan, which executes the launcher plugin's modules afresh: imported before it, the
    # hooks would raise another copy of the launcher's Refused than the one it catches
    from sweep.launch.callback import FORCE_KEY, already_done, resume_single_run  # noqa: PLC0415

    try:
        done = already_done(cfg)
        if done is not None:
            print(
                f"sweep: skipping {' '.join(HydraConfig.get().overrides.task) or 'the job'}: run {done} already "
                f"FINISHED with this config ({FORCE_KEY}=true re-runs it)",
                flush=True,
            )
            return None
        repeats = resume_single_run(cfg) if HydraConfig.get().mode == RunMode.RUN else ""
        if repeats is None:
            return None  # recorded before: shown, nothing run
        result = job.run(cfg)
        if repeats:
            result.tags[REPEAT_OF_TAG] = repeats
        return result
    except ConfigError as e:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise  # a launcher's failed job (the sweep launcher validates every job before any starts)
        # Bad input: say which field and what is allowed, exit non-zero, record nothing.
        print(f"sweep: config error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)


def presets() -> list[str]:
    """The sweep presets: `sweeps/<name>.yaml` at the project root."""
    return sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml"))


def refuse_unknown_preset(argv: list[str]) -> None:
    """`sweeps` is an optional config group, so Hydra skips an option it cannot find and runs the default job:
    an unknown preset (a typo) is refused here, exit 2, before anything is composed or run."""
    for arg in argv:
        key, eq, value = arg.lstrip("+~").partition("=")
        if key != "sweeps" or not eq or "(" in value:
            continue
        unknown = [v for v in value.split(",") if not (SWEEPS_DIR / f"{v.strip()}.yaml").is_file()]
        if unknown:
            print(
                f"sweep: config error: sweeps={unknown[0]} is not a preset: expected one of {', '.join(presets())}",
                file=sys.stderr,
                flush=True,
            )
            sys.exit(2)


def refuse_unused_additions(argv: list[str]) -> None:
    """`+key=value` at the top level adds a key no job reads, so it would be recorded nowhere: refused (exit 2).
    Free-form keys belong under `extra` (`+extra.note=...`): part of the job's identity, recorded as params."""

    known = {f.name for f in fields(Config)} | {"sweeps", "hydra"}
    for arg in argv:
        if not arg.startswith("+") or "=" not in arg:
            continue
        key = arg.lstrip("+").split("=", 1)[0]
        top = key.split("@", 1)[0].split("/", 1)[0].split(".", 1)[0]
        if top not in known:
            print(
                f"sweep: config error: {arg} is not read by any job: put free-form keys under extra "
                f"(+extra.{key}=..., recorded as a param), or set one of {', '.join(sorted(known))}",
                file=sys.stderr,
                flush=True,
            )
            sys.exit(2)


def main() -> None:
    # Ctrl-C, SIGTERM, SIGHUP: one line and 128+signal wherever they come (composition, the store's making), not
    # a traceback, and not lost; the project's launcher takes them over for its jobs (`_signals`)
    listen()
    refuse_unknown_preset(sys.argv[1:])
    refuse_unused_additions(sys.argv[1:])
    try:
        task()
        check_pending()
    except KeyboardInterrupt as e:
        stopped = as_interrupted(e)
        print(f"sweep: interrupted by {stopped.name}", file=sys.stderr, flush=True)
        sys.exit(stopped.exit_code)
    except SystemExit as e:
        # Hydra reports a bad override, a wrong type or a missing group option in a few lines (the field, and
        # for a group its options) and exits 1; bad input exits 2 here, like every other config error. (A store
        # that cannot be written is reported the same way by Hydra but is not bad input: it stays 1.)
        if e.code == 1 and isinstance(e.__context__, (ConfigCompositionException, OverrideParseException)):
            sys.exit(2)
        raise


if __name__ == "__main__":
    main()
