"""`check_job(cfg)`: the one check of a job's config, before it runs, on every path (the project's launcher
plans a sweep with it, the Hydra callback checks another launcher's grid, a single run checks itself).

In this order, so that the error names the most basic fault first:
1. fields: each option's class is one of its group's (its contract, sweep.config.schema.CONTRACTS); each field's
   value rule (type and range), declared by the class that owns the field (`field_rules`: the problems, methods,
   variants and trackers; the device's here); then every key is one its option takes (`+method.lrr=0.1`, Hydra's
   way to add a key, is a misspelt key);
2. method x problem: the method's declared `problems` (sweep.config.applicability), before the options' own
   checks, which read the fields of the problems their method applies to (sgd on problem=chars has no loss);
   and method x variant: a variant other than standard only for a method whose step is a variant's
   (`takes_variant`);
3. each option class's own `check_config` (a tiled variant's tile size, fourier's subset count, an energy
   hierarchy that must load, ...);
4. size: the job's estimated peak memory against what this machine has left, and its least work against its
   time limit (sweep.config.memory, from the formulas each option class declares);
5. where it runs: a job run on this machine needs its device here (a CUDA GPU for device=cuda); a job placed on
   Modal needs a price for its GPU (sweep.config.prices).
Each raises `ConfigError` naming the field and what is allowed (exit 2, before any job starts).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from typing import Any, Callable, Optional

from omegaconf import DictConfig, OmegaConf

from sweep.backend import AUTOCAST_DTYPES, COMPILE_MODES, require_device
from sweep.config.applicability import check_method_applies, check_variant_applies, option_class
from sweep.config.fields import Rule, check_rules, choice, nonneg_finite, positive_finite
from sweep.config.memory import available_bytes, check_fits, check_grid, check_time
from sweep.config.prices import PriceTableError, gpu_price_per_hour
from sweep.config.schema import JOB_GROUPS, SCHEMAS
from sweep.config.suggest import expected
from sweep.config.view import ConfigView
from sweep.errors import ConfigError

MAX_THREADS = 1024  # more than any CPU's cores: a typed size, not a machine

# the device's fields are plain data (sweep.config.schema.DeviceConfig): their rules are written here
DEVICE_RULES: tuple[Rule, ...] = (
    Rule(
        "device.price_per_hour",
        "a finite number >= 0, or null (the Modal price of device.gpu)",
        lambda v, c: v is None or nonneg_finite(v, c),
    ),
    choice("device.backend", ("numpy", "torch")),
    # past a few tens of thousands, OpenMP's pool segfaulted torch at its first parallel region (no line, no run)
    Rule(
        "device.threads",
        f"an integer from 0 to {MAX_THREADS} (0: the libraries' defaults)",
        lambda v, c: isinstance(v, int) and 0 <= v <= MAX_THREADS,
    ),
    # anything else (mps, xla) failed the run after its start: torch builds here know cpu and cuda
    Rule(
        "device.torch_device",
        "cpu, cuda or cuda:N",
        lambda v, c: isinstance(v, str) and re.fullmatch(r"cpu|cuda(:\d+)?", v) is not None,
    ),
    choice("device.compile_mode", COMPILE_MODES),
    # an unknown backend failed the run after its start (torch's InvalidBackend); torch's list needs torch._dynamo
    # (~3 s), asked only where a torch job compiles with another backend than the default
    Rule(
        "device.compile_backend",
        "a torch.compile backend: inductor, aot_eager, eager, cudagraphs (torch._dynamo.list_backends())",
        lambda v, c: v == "inductor" or not (c.device.compile and c.device.backend == "torch") or v in _backends(),
    ),
    Rule(
        "device.autocast",
        f"one of {', '.join(AUTOCAST_DTYPES)} (float16/bfloat16 need device.backend=torch)",
        lambda v, c: v in AUTOCAST_DTYPES and (v == "none" or c.device.backend == "torch"),
    ),
    choice("device.dtype", ("float32", "float64")),
    choice("device.rng", ("host", "counter")),
)


# a challenge round's ranking rules are plain data (sweep.config.schema.ChallengeConfig), read by its leaderboard,
# not by a job: a floor of 2 or a budget of -1 J ran the whole round, then ranked no entrant
CHALLENGE_RULES: tuple[Rule, ...] = (
    Rule(
        "challenge.accuracy_floor",
        "a number from 0 to 1 (the least mean accuracy that passes)",
        lambda v, c: nonneg_finite(v) and v <= 1,
    ),
    Rule(
        "challenge.energy_budget_j",
        "a finite number of joules > 0, or null (no budget)",
        lambda v, c: v is None or positive_finite(v),
    ),
)


def check_challenge(cfg: DictConfig) -> None:
    """The round's rules (CHALLENGE_RULES) and the size of its seeds' grid, before any of its jobs (and before the
    grid is drawn); ConfigError naming the key."""
    challenge = cfg.get("challenge")
    if challenge is not None:
        view = ConfigView({"challenge": OmegaConf.to_container(challenge, resolve=True)})
        check_rules(CHALLENGE_RULES, view)
        seeds = view.select("challenge.seeds")
        if isinstance(seeds, int):  # the fresh seeds a round draws are its grid's values (${fresh_seeds:...}): 10**8
            check_grid({"challenge.seeds": seeds})  # were drawn and joined for minutes, before any other check


@functools.lru_cache(maxsize=1)
def _backends() -> frozenset[str]:
    """torch.compile's backends in this torch, the debugging ones included (aot_eager)."""
    from torch._dynamo import list_backends  # noqa: PLC0415 - seconds: only for a compiled torch job's backend

    return frozenset(list_backends(exclude_tags=()))


def check_fields(view: ConfigView) -> None:
    """Stage 1: every present field's value rule, group by group; then every key is one its option takes."""
    for group in JOB_GROUPS:
        cls = option_class(view, group)
        check_rules(DEVICE_RULES if group == "device" else cls.field_rules if cls is not None else (), view)
    check_known_keys(view)


@functools.lru_cache(maxsize=None)
def _fields(group: str, option: Any, target: Any) -> Optional[frozenset[str]]:
    """The keys option `option` of `group` may hold: its schema's fields and its class's parameters (a
    `_target_` set to another class may take others); None when any key goes (a class taking **kwargs)."""
    schemas = SCHEMAS.get(group, {})
    schema = schemas.get(option) or (next(iter(schemas.values())) if len(schemas) == 1 else None)
    known = {f.name for f in dataclasses.fields(schema)} if schema is not None else set()
    cls = option_class(ConfigView({group: {"_target_": target}}), group) if target else None
    if cls is not None:
        params = inspect.signature(cls).parameters.values()
        if any(p.kind == p.VAR_KEYWORD for p in params):
            return None
        known |= {p.name for p in params}
    return frozenset(known) if known else None


def check_known_keys(cfg: ConfigView) -> None:
    """Every key of a job group is one its option takes: `+method.lrr=0.1` (how Hydra adds a key) is a misspelt
    key, refused here with the keys there are, rather than by the class's constructor inside the job."""
    for group in JOB_GROUPS:
        node = cfg.get(group)
        if not isinstance(node, dict):
            continue
        known = _fields(group, node.get("name"), node.get("_target_"))
        unknown = [k for k in node if k not in known] if known is not None else []
        if unknown:
            keys = [k for k in known if k not in ("_target_", "name")]  # type: ignore[union-attr]
            key = min(unknown)
            raise ConfigError(f"{group}.{key} is not a key of {group}={node.get('name', '?')}: {expected(key, keys)}")


def check_options(view: ConfigView) -> None:
    """Stage 3: each option class's own `check_config(view)`."""
    for group in JOB_GROUPS:
        cls = option_class(view, group)
        if cls is not None:
            cls.check_config(view)


def _default(view: ConfigView, dotted: str) -> Any:
    """The default of field `dotted` in the chosen option's schema (sweep.config.schema)."""
    group, _, key = dotted.partition(".")
    options = SCHEMAS.get(group, {})
    schema = options.get(str(view.select(f"{group}.name"))) or next(iter(options.values()), None)
    return getattr(schema, key, None)


def check_device_here(view: ConfigView, runs_here: bool) -> None:
    """Stage 5: a job that runs on this machine (a single run, a local worker, Modal offline) needs its device."""
    if runs_here:
        require_device(str(view.select("device.backend", "numpy")), str(view.select("device.torch_device", "cpu")))


def check_price(where: str, gpu: Optional[str], prices: Optional[str]) -> None:
    """Stage 5: a job that runs on Modal is billed at its GPU's rate, so the rate must be known."""
    if where != "modal":
        return
    try:
        gpu_price_per_hour(gpu, prices)
    except PriceTableError as e:
        raise ConfigError(
            f"hydra.launcher.modal.prices={prices} is not allowed: {e}: expected a YAML file of usd_per_hour: "
            f"{{GPU type: dollars an hour}}, as conf/prices/modal_gpu.yaml (null: that file)"
        ) from None
    except KeyError as e:
        raise ConfigError(f"device.gpu: {e.args[0]}") from None


def check_job(
    cfg: "DictConfig | dict[str, Any]",
    where: str = "local",
    gpu: Optional[str] = None,
    prices: Optional[str] = None,
    runs_here: bool = False,
    runs: int = 1,
    available: Callable[[], Optional[float]] = available_bytes,
    time_limit_s: Optional[float] = None,
) -> ConfigView:
    """Raise ConfigError on the first fault, stage by stage (see the module's docstring). `cfg`: the composed
    config, or the job's resolved config as plain data (sweep.job.job_config); `where`/`gpu`: the job's
    placement (sweep.config.placement), `prices` the launcher's Modal price table; `runs_here`: the job runs on
    this machine, so its device must be here too; `runs`: the runs of its batch (hydra.launcher.batch), held in
    memory together; `available`: what memory this machine has left (a sweep's check reads it once for all its
    jobs); `time_limit_s`: the launcher's limit a run. Returns the view it read."""
    view = ConfigView.of(cfg)
    check_fields(view)
    check_method_applies(view)
    check_variant_applies(view)
    check_options(view)
    check_fits(view, runs, available, functools.partial(_default, view))
    check_time(view, time_limit_s, functools.partial(_default, view))
    check_device_here(view, runs_here)
    check_price(where, gpu, prices)
    return view
