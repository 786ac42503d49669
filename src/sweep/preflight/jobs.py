"""Each job's config, checked before any job starts (`sweep.config.check.check_job`: fields, each option's own
check, method x problem, memory, device and price), and named in the refusal as its sweep names it."""

from __future__ import annotations

import itertools
from typing import Any

from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.sweep_launcher.naming import Namer
from sweep.config.check import check_job
from sweep.errors import ConfigError, NoDeviceHere
from sweep.job import job_config
from sweep.preflight.composition import explain
from sweep.preflight.placement import without_gpu
from sweep.preflight.refusal import Refusal
from sweep.record.session import is_sweep_job


def check_planned(config: "dict[str, Any] | DictConfig", label: str, **placed: Any) -> None:
    """One job of a sweep (its resolved config), named `label` in the refusal; `placed`: check_job's keywords
    (where it runs, its GPU, the price table, runs_here, the runs of its batch, the memory left)."""
    try:
        check_job(config, **placed)
    except NoDeviceHere as e:
        raise Refusal(f"config error in job {label}: {e}: {without_gpu(sweep=True)}") from None
    except ConfigError as e:
        raise Refusal(f"config error in job {label}: {e}") from None


def check_single_run(config: "dict[str, Any]") -> None:
    """A single run: it runs on this machine, so its device must be here."""
    try:
        check_job(config, runs_here=True)
    except NoDeviceHere as e:
        raise Refusal.config_error(f"{e}: {without_gpu(sweep=False)}") from None
    except ConfigError as e:
        raise Refusal.config_error(str(e)) from None


def check_grid(config: DictConfig, runs_here: bool) -> None:
    """Under Hydra's basic sweeper on a launcher other than the project's: every job of the grid composed and
    checked before any starts, as the project's launcher does. The grid is the basic sweeper's:
    hydra.sweeper.params, then the command line, one value list per key. Other sweepers (optuna) make jobs as
    they go: those are checked where they run."""
    if not str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).endswith(".BasicSweeper"):
        return

    from hydra.core.global_hydra import GlobalHydra  # noqa: PLC0415 - only under Hydra's basic sweeper on another launcher
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415 - Hydra's override grammar (ANTLR): ~0.2 s, only when a multirun is named

    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    lines = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    loader = GlobalHydra.instance().config_loader()
    grid: dict[str, list[str]] = {}
    for o in OverridesParser.create(config_loader=loader).parse_overrides(lines):
        key = o.get_key_element()
        grid[key] = (
            [f"{key}={v}" for v in o.sweep_string_iterator()]
            if o.is_sweep_override()
            else [f"{key}={o.get_value_element_as_str()}"]
        )
    namer = Namer.for_multirun(config.hydra)
    for idx, job in enumerate(itertools.product(*grid.values())):
        try:
            cfg = loader.load_sweep_config(config, list(job))
        except CompactHydraException as e:  # an option or key that does not exist, a wrong type
            raise explain(e) or e from None
        if not is_sweep_job(cfg):
            return
        # the job named as the project's launcher names it: by what the sweep varies
        check_planned(job_config(cfg), namer.names([list(job)], [idx])[0], runs_here=runs_here)
