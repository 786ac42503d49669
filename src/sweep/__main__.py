"""`python -m sweep`: the one train entrypoint. Config groups: problem, method, variant, device, tracker."""
from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from sweep.paths import CONF_DIR, SWEEPS_DIR
from sweep.result import RunResult
from sweep.schema import register_configs
from sweep.validate import ConfigError

register_configs()


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def task(cfg: DictConfig) -> RunResult:
    from sweep import job

    try:
        return job.run(cfg)
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
            print(f"sweep: config error: sweeps={unknown[0]} is not a preset: expected one of "
                  f"{', '.join(presets())}", file=sys.stderr, flush=True)
            sys.exit(2)


def main() -> None:
    refuse_unknown_preset(sys.argv[1:])
    task()


if __name__ == "__main__":
    main()
