"""`python -m sweep`: the one train entrypoint. Config groups: problem, method, variant, device, tracker."""
from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from sweep.paths import CONF_DIR
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


def main() -> None:
    task()


if __name__ == "__main__":
    main()
