"""Each job's config, checked before any job starts (`sweep.config.check.check_job`: fields, each option's own
check, method x problem, memory, device and price), and named in the refusal as its sweep names it."""

from __future__ import annotations

import itertools
from functools import partial
from typing import Any, Callable

from hydra.errors import CompactHydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from hydra_plugins.sweep_launcher.api import Namer
from sweep.config.check import check_challenge, check_job
from sweep.errors import ConfigError, NoDeviceHere
from sweep.job import job_config
from sweep.preflight.composition import explain
from sweep.preflight.interpolations import check_interpolations
from sweep.preflight.placement import without_gpu
from sweep.preflight.refusal import Refusal
from sweep.record.recorder import config_hash
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


def resolves(make: Callable[[], Any], label: str) -> Any:
    """A job's resolved config (`make()`: sweep.job.job_config of it); a value whose interpolation does not resolve
    (`problem.seed='${oops}'`) is refused naming the job."""
    try:
        return make()
    except ConfigError as e:
        raise Refusal(f"config error in job {label}: {e}") from None


def twice(first: str, second: str) -> None:
    """Two jobs of a grid with one config (`problem.seed=5,5`): both ran and were recorded, the second named
    `seed=5 #1`, where a config is recorded once and a re-run skips it."""
    raise Refusal.config_error(
        f"jobs {first} and {second} have the same config, and a sweep runs a config once: give each value once "
        "(repeats of a config: +extra.repeat=range(0,N))"
    )


def check_rules_of_round(config: DictConfig) -> None:
    """A challenge round's ranking rules (sweep.config.check.check_challenge), before any job."""
    try:
        check_challenge(config)
    except ConfigError as e:
        raise Refusal.config_error(str(e)) from None


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
    if not basic_sweeper(config):
        return

    from hydra.core.global_hydra import GlobalHydra  # noqa: PLC0415 - only under Hydra's basic sweeper on another launcher
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415 - Hydra's override grammar (ANTLR): ~0.2 s, only when a multirun is named

    loader = GlobalHydra.instance().config_loader()
    grid: dict[str, list[str]] = {}
    for o in OverridesParser.create(config_loader=loader).parse_overrides(grid_lines(config)):
        key = o.get_key_element()
        grid[key] = (
            [f"{key}={v}" for v in o.sweep_string_iterator()]
            if o.is_sweep_override()
            else [f"{key}={o.get_value_element_as_str()}"]
        )
    namer = Namer.for_multirun(config.hydra)
    labels: dict[str, str] = {}  # config hash -> the first job with it
    for idx, job in enumerate(itertools.product(*grid.values())):
        try:
            cfg = loader.load_sweep_config(config, list(job))
        except CompactHydraException as e:  # an option or key that does not exist, a wrong type
            raise explain(e) or e from None
        if not is_sweep_job(cfg):
            return
        # the job named as the project's launcher names it: by what the sweep varies
        label = namer.names([list(job)], [idx])[0]
        resolved = resolves(partial(job_config, cfg), label)
        twin = labels.setdefault(config_hash(resolved), label)
        if twin != label:
            twice(twin, label)
        if any("${" in o for o in job):  # a swept interpolation: the sweep's start saw none of it
            check_interpolations(cfg, label)
        check_planned(resolved, label, runs_here=runs_here)


def check_not_empty(config: DictConfig) -> None:
    """Under Hydra's basic sweeper, a key swept over no value (`problem.seed=range(0)`, `range(5,1)`) makes a sweep
    of no job, which ended at once reporting "0 job(s) finished": refused, naming the key."""
    if not basic_sweeper(config):
        return
    from hydra.core.global_hydra import GlobalHydra  # noqa: PLC0415 - only when a multirun is named
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415 - Hydra's override grammar (ANTLR): ~0.2 s, only when a multirun is named
    from hydra.core.override_parser.types import IntervalSweep, RangeSweep  # noqa: PLC0415

    # glob() lists a group's options through Hydra's config loader ("ConfigLoader is not set" without it)
    loader = GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None
    for o in OverridesParser.create(config_loader=loader).parse_overrides(grid_lines(config)):
        if not o.is_sweep_override():
            continue
        value = o.value()
        # each was a traceback of Hydra's sweep iterator (a HydraException, range()'s ValueError)
        if isinstance(value, IntervalSweep):
            raise Refusal.config_error(
                f"{o.input_line} is a search's interval, and Hydra's basic sweeper runs a grid: expected a,b,c, "
                "choice(a,b) or range(start,stop[,step]) (an interval needs hydra/sweeper=optuna)"
            )
        if isinstance(value, RangeSweep) and not value.step:
            raise Refusal.config_error(
                f"{o.input_line} steps by 0: expected range(start,stop) or a step other than 0 (e.g. range(0,10,2))"
            )
        if next(iter(o.sweep_string_iterator()), None) is None:
            raise Refusal.config_error(
                f"{o.input_line} sweeps over no value, so the sweep has no job: expected at least one value "
                "(e.g. range(0,5): 0 to 4)"
            )


def basic_sweeper(config: DictConfig) -> bool:
    """Hydra's basic sweeper makes the grid (other sweepers, optuna's, make jobs as they go)."""
    return str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).endswith(".BasicSweeper")


def grid_lines(config: DictConfig) -> list[str]:
    """The basic sweeper's grid as override lines: hydra.sweeper.params, resolved as Hydra resolves them when it
    makes the sweeper (a preset's `${fresh_seeds:3}`), then the command line as written (an override's value may
    look like an interpolation, `x=${oops}`: the job's to resolve, not this one's)."""
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None)
    lines = [f"{k}={_resolved(params, k)}" for k in params or ()]
    return lines + list(OmegaConf.to_container(config.hydra.overrides.task))


def _resolved(params: DictConfig, key: str) -> Any:
    try:
        return params[key]
    except OmegaConfBaseException as e:  # a resolver's own line (an empty round) when it has one
        cause: BaseException = e
        while isinstance(cause, OmegaConfBaseException) and (cause.__cause__ or cause.__context__):
            cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
        raise Refusal.config_error(str(cause).splitlines()[0]) from None
