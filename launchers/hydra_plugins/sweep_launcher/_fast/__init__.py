"""The fast twins: modules that reproduce what Hydra and OmegaConf do, faster, through their internals, each
checked against the public path it replaces by its parity test (`PARITY`). All of them sit behind the one switch
here, `fast_paths`: on by default only on the Hydra and OmegaConf versions they were tested against; elsewhere,
or with `hydra.launcher.fast=false`, the launcher takes Hydra's public path (load_sweep_config, run_job).

This module stays light (Hydra's plugin scan imports launcher.py, which imports it): the twins are imported
only once the switch says so.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import Optional

# the versions the twins were checked against (version prefixes): Hydra's, and OmegaConf's, whose private
# helpers (`omegaconf._utils`, `_get_node`, `_set_parent`) the lean run_job uses
TESTED_HYDRA = ("1.3.",)
TESTED_OMEGACONF = ("2.3.",)

# each twin -> what it replaces, and the test file that checks it gives what the public path gives
PARITY = {
    "compose": ("Hydra's load_sweep_config, per job", "tests/test_launcher.py, tests/test_check_pass.py"),
    "in_place": ("OmegaConf's assignment of a plain value", "tests/test_check_pass.py"),
    "template": ("a job's config composed whole by the launcher", "tests/test_dispatch_configs.py"),
    "run_job": ("Hydra's run_job", "tests/test_run_job.py"),
    "parse_cache": ("OmegaConf's interpolation parser, per access", "tests/test_run_job.py"),
    "compose_once": ("Hydra's second composition of a command's config", "tests/test_compose_once.py"),
}


def fast_paths_tested(hydra_version: Optional[str] = None, omegaconf_version: Optional[str] = None) -> bool:
    """Whether these versions (default: the installed ones) are ones the twins were tested against."""
    if hydra_version is None:
        from hydra import __version__ as hydra_version  # noqa: PLC0415 - only to compare versions, once
    if omegaconf_version is None:
        from omegaconf import __version__ as omegaconf_version  # noqa: PLC0415 - only to compare versions, once
    return hydra_version.startswith(TESTED_HYDRA) and omegaconf_version.startswith(TESTED_OMEGACONF)


def fast_paths(requested: Optional[bool]) -> bool:
    """Whether to take the twins. None: where the Hydra and OmegaConf versions were tested; true: asked for.
    Either way only if what they use is there; otherwise Hydra's public path (with a warning if asked for)."""
    if requested is False or (requested is None and not fast_paths_tested()):
        return False
    try:
        for name in ("compose", "run_job"):
            import_module(f"{__name__}.{name}")
    except (ImportError, AttributeError) as e:
        if requested:
            from hydra import __version__  # noqa: PLC0415 - only to compare versions, once

            warnings.warn(
                f"hydra.launcher.fast=true: Hydra {__version__} lacks an internal the fast path uses "
                f"({e}); taking Hydra's public path",
                stacklevel=2,
            )
        return False
    return True
