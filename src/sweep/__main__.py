"""`python -m sweep`: the one train entrypoint. Config groups: problem, method, variant, device, tracker."""

from __future__ import annotations

import logging
import sys

from hydra_plugins.sweep_launcher.api import (
    as_interrupted,
    check_pending,
    compose_once,
    listen,
    output_closed,
    reader_gone,
    starting,
)

# the imports take seconds: a signal in them is one line and 128+n, not a traceback
with starting("sweep"):
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import DictConfig

    from sweep.config.schema import register_configs
    from sweep.errors import ConfigError
    from sweep.paths import CONF_DIR
    from sweep.preflight.command import check_command
    from sweep.preflight.composition import composed, composition_refused
    from sweep.preflight.refusal import Refusal
    from sweep.record.tags import REPEAT_OF_TAG
    from sweep.result import RunResult

    register_configs()
_failed = False  # the single run failed: its record and line are made, the command exits 1


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def task(cfg: DictConfig) -> RunResult | None:
    composed()  # the config is made: from here Hydra reports a failure its own way
    from sweep import job  # noqa: PLC0415 - the job's modules: when Hydra runs the task, after composition

    # after Hydra's plugin scan, which executes the launcher plugin's modules afresh: imported before it, the
    # hooks would raise another copy of the launcher's Refused than the one it catches
    from sweep.launch.callback import FORCE_KEY, already_done, resume_single_run  # noqa: PLC0415
    from sweep.record.session import failed_result  # noqa: PLC0415

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
        try:
            result = job.run(cfg)
        except (ConfigError, Refusal):
            raise
        except Exception as e:
            if HydraConfig.get().mode == RunMode.MULTIRUN:
                raise  # Hydra's basic launcher: its callback records the job FAILED
            # a single run that fails: recorded FAILED with its traceback (an artifact), said in its one [FAILED]
            # line as a sweep's job is, exit 1; not Hydra's report of the traceback after it
            global _failed
            _failed = True
            return failed_result(cfg, e)
        if repeats:
            result.tags[REPEAT_OF_TAG] = repeats
        return result
    except Refusal as e:  # a single run's preflight (sweep.preflight): one line, its exit code, nothing recorded
        e.exit()
    except ConfigError as e:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise  # a launcher's failed job (the sweep launcher validates every job before any starts)
        # Bad input: say which field and what is allowed, exit non-zero, record nothing.
        Refusal.config_error(str(e)).exit()


def main() -> None:
    # Ctrl-C, SIGTERM, SIGHUP: one line and 128+signal wherever they come (composition, the store's making), not
    # a traceback, and not lost; the project's launcher takes them over for its jobs (`_signals`)
    listen()
    try:
        sys.argv[1:] = check_command(sys.argv[1:])
        compose_once(sys.argv[1:])  # Hydra composes the config to read its mode, then again to run it: once
        info = any(a in ("-i", "--info") or a.startswith("--info=") for a in sys.argv[1:])
        if info:  # Hydra's --info report goes through logging, whose closed output is a traceback per record
            logging.raiseExceptions = False
        with composition_refused():
            task()
        if info and reader_gone():
            raise BrokenPipeError  # answered below, as --help's and --cfg's
        check_pending()
        if _failed:
            sys.exit(1)
    except Refusal as e:
        e.exit()
    except BrokenPipeError:  # `sweep --help | head`, `--cfg job | head`: silent, 141, as `git log | head` (a run's or
        sys.exit(output_closed().exit_code)  # a sweep's own closed output is answered where its records are)
    except KeyboardInterrupt as e:
        stopped = as_interrupted(e)
        print(stopped.line, file=sys.stderr, flush=True)
        sys.exit(stopped.exit_code)


if __name__ == "__main__":
    main()
