"""Structured-config schemas: every config group option is backed by a dataclass here, so a misspelt key
or a wrong type fails when Hydra composes the config, before any job starts.

An option built from a class (a problem, a method, a variant, a tracker) has its schema derived from that class: the
class's fields, types and defaults, written once in the class, plus its `_target_`. Options that are plain data
(device, mlflow, compare) are written here. Option yaml files in conf/<group>/ start from their
schema with ``defaults: [/schema/<group>@_here_: <option>, _self_]`` and set only what differs from it
(tests/test_shape.py checks both). Value rules that a type cannot express (k_sparse <= n_bits, lr > 0, ...) are
checked by sweep.config.check.check_job.
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from sweep.backend import KNOBS, Backend
from sweep.config.resolvers import entrants, fresh_seeds
from sweep.paths import store_sibling


@dataclass
class OptionConfig:
    """What every option built from a class has: the class (`_target_`) and the option's name."""

    _target_: Optional[str] = MISSING
    name: str = MISSING


def _field_type(f: dataclasses.Field) -> Any:
    """A field's annotation as a type OmegaConf checks (the classes write them as strings: postponed
    annotations); only plain types are allowed in an option's fields."""
    if not isinstance(f.type, str):
        return f.type
    return eval(f.type, {"Optional": Optional, "Any": Any}, {})  # noqa: S307 -- a class's own annotation


def from_class(target: str, base: tuple[type, ...] = (), instantiate: bool = True) -> type:
    """The schema of the option built from class `target`: its init fields with their types and defaults, and
    `_target_` itself (null when ``instantiate`` is false: the option carries the class's fields but builds
    nothing, as tracker=none). The schema's ``source_class`` names the class it was derived from."""
    module, _, name = target.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    specs: list[tuple[str, Any, Any]] = [
        ("_target_", str, field(default=target)) if instantiate else ("_target_", Optional[str], field(default=None))
    ]
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        default = (
            field(default=f.default)
            if f.default is not dataclasses.MISSING
            else field(default_factory=f.default_factory)
        )
        specs.append((f.name, _field_type(f), default))
    schema = dataclasses.make_dataclass(f"{name}Config", specs, bases=base, namespace={"source_class": target})
    # a module attribute of its own name, so that configs typed by it pickle (to the launcher's workers)
    schema.__module__ = __name__
    globals()[schema.__qualname__] = schema
    return schema


# group -> the contract every option class of the group is a subclass of: what the check, the job and the batch read
# of an option class, each with its default (docs/extending.md)
CONTRACTS: dict[str, str] = {
    "problem": "sweep.problems.base.ProblemBase",
    "method": "sweep.methods.base.MethodBase",
    "variant": "sweep.variants.base.Variant",
    "tracker": "sweep.trackers.base.TrackerBase",
}
# the registry: option -> the class it builds, per group (conf/<group>/<option>.yaml starts from its schema, derived
# from the class; tests/test_registry.py keeps the two equal)
CLASSES: dict[str, dict[str, str]] = {
    "problem": {
        "sparse_parity": "sweep.problems.sparse_parity.SparseParity",
        "sparse_and": "sweep.problems.sparse_and.SparseAnd",
        "sparse_sum": "sweep.problems.sparse_sum.SparseSum",
        "chars": "sweep.problems.chars.Chars",
    },
    "method": {
        "sgd": "sweep.methods.sgd.SGD",
        "gf2": "sweep.methods.gf2.GF2",
        "km": "sweep.methods.km.KM",
        "sign_sgd": "sweep.methods.sign_sgd.SignSGD",
        "curriculum": "sweep.methods.curriculum.Curriculum",
        "fourier": "sweep.methods.fourier.Fourier",
        "smt": "sweep.methods.smt.SMT",
        "forward_forward": "sweep.methods.forward_forward.ForwardForward",
        "ols": "sweep.methods.ols.OLS",
        "bigram": "sweep.methods.lm.bigram.Bigram",
        "mlp_lm": "sweep.methods.lm.mlp_lm.MLPLM",
        "gpt": "sweep.methods.lm.gpt.GPT",
        "solver": "sweep.methods.solver.Solver",
        "char_model": "sweep.methods.char_model.CharModel",
    },
    "variant": {
        "standard": "sweep.variants.standard.Standard",
        "fused": "sweep.variants.fused.Fused",
        "perlayer": "sweep.variants.perlayer.PerLayer",
        "tiled": "sweep.variants.tiled.Tiled",
        "tiled_fused": "sweep.variants.tiled_fused.TiledFused",
        "tiled_w2": "sweep.variants.tiled_w2.TiledW2",
    },
    "tracker": {
        "ard": "sweep.trackers.ard.ARDTracker",
        "cache": "sweep.trackers.cache.CacheTracker",
        "dmd": "sweep.trackers.dmd.DMDTracker",
        "bytedmd": "sweep.trackers.bytedmd.ByteDMDTracker",
        "energy": "sweep.trackers.energy.EnergyTracker",
    },
}
# tracker=none carries the fields every tracker has (scope, cache size) and records no trace at all
UNBUILT: dict[str, dict[str, str]] = {"tracker": {"none": "sweep.trackers.base.TrackerBase"}}


def _derived(group: str) -> dict[str, type]:
    return {
        **{o: from_class(t, (OptionConfig,)) for o, t in CLASSES[group].items()},
        **{o: from_class(t, (OptionConfig,), instantiate=False) for o, t in UNBUILT.get(group, {}).items()},
    }


def _device_config() -> type:
    """device: which library and torch device, the array backend's knobs (derived from sweep.backend.Backend,
    whose fields of the same names they are), and where it runs and at what price."""

    backend = {f.name: f for f in dataclasses.fields(Backend)}
    return dataclasses.make_dataclass(
        "DeviceConfig",
        [
            ("name", str, field(default="cpu")),
            ("backend", str, field(default=backend["name"].default)),  # numpy | torch
            ("torch_device", str, field(default=backend["device"].default)),  # torch device string when backend=torch
            *((k, _field_type(backend[k]), field(default=backend[k].default)) for k in KNOBS),
            # USD per hour of this device (cost_usd = wall_clock_s * price_per_hour / 3600); null: the Modal price of
            # device.gpu (sweep.config.prices.device_price_per_hour)
            ("price_per_hour", Optional[float], field(default=0.0)),
            ("gpu", Optional[str], field(default=None)),  # Modal GPU type (L4, A10G, A100, H100, ...) for cuda jobs
            ("local_gpu", bool, field(default=False)),  # run cuda jobs on this machine's GPU instead of Modal
        ],
        namespace={"__module__": __name__},
    )


DeviceConfig = _device_config()


@dataclass
class MLflowConfig:
    tracking_uri: Optional[str] = None  # null: the project's store, <project>/mlruns (or $MLFLOW_TRACKING_URI)
    experiment: str = "sweep"
    enabled: bool = True
    # re-run jobs that already have a FINISHED run, under any launcher (sweep.launch.hooks.FORCE_KEY; the
    # project's launcher also has its own switch, hydra.launcher.force)
    force: bool = False
    # a tracking server (http/https) that does not answer within this many seconds is refused before any job
    # (sweep.record.remote), where MLflow's client would retry for minutes
    connect_timeout_s: float = 5.0


@dataclass
class CompareConfig:
    """How `python -m sweep.compare` reads a preset's study (set in sweeps/<study>.yaml; jobs ignore it)."""

    baseline: dict[str, Any] = field(default_factory=dict)  # swept key -> value of the baseline arm
    relative: dict[str, str] = field(default_factory=dict)  # metric -> percent | speedup, against the baseline
    # proxy ranking (sweep.energy.proxies): {target: [metric, ...], by: a swept key, metrics: [proxy, ...]}
    proxies: dict[str, Any] = field(default_factory=dict)
    # the study's key metrics, in order: the terminal table's columns (the others with --wide and in the artifacts)
    metrics: list[str] = field(default_factory=list)
    # the rows' Pareto front (sweep.report.pareto): metric -> maximize | minimize (a search preset's
    # hydra.sweeper.objectives are its front); drawn as the first objective against the second and each of `versus`
    front: dict[str, str] = field(default_factory=dict)
    versus: list[str] = field(default_factory=list)
    # a challenge's ranking instead of the table (sweep.report.leaderboard): {accuracy: the least mean accuracy that
    # passes, time_limit_s: the most seconds a finished run may have taken}
    leaderboard: dict[str, Any] = field(default_factory=dict)
    # a study whose runs are kept as CSV files in the repository (a directory under the project's root, e.g.
    # docs/results/proxy_study): compare reads every file there (sweep.proxy_study.report), not the store's sweep
    dataset: str = ""


def _defaults(target: str) -> dict[str, Any]:
    """The field defaults of the registry's class `target` (imported by name, as from_class does)."""
    module, _, name = target.rpartition(".")
    return {f.name: f.default for f in dataclasses.fields(getattr(importlib.import_module(module), name))}


_CHAR = _defaults(CLASSES["method"]["char_model"])  # method=char_model's rules, written there


@dataclass
class ChallengeConfig:
    """A challenge round's entrants (sweeps/parity_challenge.yaml, sweeps/char_challenge.yaml): the sweep's
    `method.path` values (sweep.config.resolvers); and the character challenge's rules, which method=char_model's
    keys and the leaderboard read (`${challenge.max_train_s}`)."""

    solvers: list[str] = field(default_factory=list)  # the users' solvers: <file.py>:<function> or <module>:<function>
    references: list[str] = field(default_factory=list)  # the project's exact methods (sweep.challenge.references)
    seeds: int = 3  # fresh seeds a round draws (the group's scorer runs 3)
    models: list[str] = field(default_factory=list)  # the users' character models: <file.py>:<function>
    max_train_s: float = _CHAR["max_train_s"]
    score_chars: int = _CHAR["score_chars"]
    gate_split: str = _CHAR["gate_split"]
    accuracy_floor: float = 0.70  # the group's floor: below it disqualified; above, ranked by training Joules
    energy_budget_j: Optional[float] = None  # the other framing: above it disqualified; within, ranked by accuracy


@dataclass
class Config:
    problem: OptionConfig = MISSING
    method: OptionConfig = MISSING
    variant: OptionConfig = MISSING
    device: DeviceConfig = MISSING
    tracker: OptionConfig = MISSING
    mlflow: MLflowConfig = field(default_factory=MLflowConfig)
    run_name: Optional[str] = None
    # the most runs solved together in one worker task under the project's launcher, where hydra.launcher.batch is
    # not set (the presets turn batching on here: other launchers know no `batch`); null: each job alone
    batch: Optional[int] = None
    # the most seconds a run may take under the project's launcher, where hydra.launcher.time_limit_s is not set (a
    # preset's rule, as `batch`): past it its worker is killed and the run recorded FAILED; null: no limit
    time_limit_s: Optional[float] = None
    extra: dict[str, Any] = field(default_factory=dict)
    compare: CompareConfig = field(default_factory=CompareConfig)
    challenge: ChallengeConfig = field(default_factory=ChallengeConfig)


# group -> option -> schema; the groups a job is made of, in this order
SCHEMAS: dict[str, dict[str, type]] = {
    "problem": _derived("problem"),
    "method": _derived("method"),
    "variant": _derived("variant"),
    "device": {"device": DeviceConfig},
    "tracker": _derived("tracker"),
}
JOB_GROUPS: tuple[str, ...] = tuple(SCHEMAS)  # problem, method, variant, device, tracker


def typed_fields(prefix: str, schemas: "list[type]", kind: type) -> dict[str, bool]:
    """`prefix.<field>` -> whether it also takes null, for each field typed `kind` (or Optional[kind]) in every one
    of `schemas` that has it. OmegaConf converts what such a field is given: a bool field reads 2, yes or on as
    true (mlflow.force=2 re-ran a recorded job), a str field reads the boolean true as 'True'
    (mlflow.experiment=true recorded into an experiment named True), so the command line's values for them are
    checked before Hydra converts them (sweep.preflight.command), and interpolations into them once they resolve
    (sweep.preflight.interpolations)."""
    kinds: dict[str, set[Any]] = {}
    found: dict[str, bool] = {}
    for schema in schemas:
        for name, hint in typing.get_type_hints(schema).items():
            if dataclasses.is_dataclass(hint):  # a section of its own (hydra.launcher.modal)
                found.update(typed_fields(f"{prefix}.{name}", [hint], kind))
            else:
                kinds.setdefault(name, set()).add(hint)
    found.update(
        {
            f"{prefix}.{name}": Optional[kind] in hints
            for name, hints in kinds.items()
            if hints and hints <= {kind, Optional[kind]}
        }
    )
    return found


def config_typed_fields(kind: type) -> dict[str, bool]:
    """Every field typed `kind` of a job's config and of the config's own sections (bool: mlflow.force,
    device.compile, method.checkpoint, ...; str: mlflow.experiment, run_name, problem.path, ...): see typed_fields."""
    found: dict[str, bool] = {}
    for group, nodes in SCHEMAS.items():
        found.update(typed_fields(group, list(nodes.values()), kind))
    for name, hint in typing.get_type_hints(Config).items():
        if dataclasses.is_dataclass(hint) and name not in SCHEMAS:
            found.update(typed_fields(name, [hint], kind))
        elif hint in (kind, Optional[kind]):  # a top-level field (run_name)
            found[name] = hint == Optional[kind]
    return found


def register_configs() -> None:
    """The schemas in Hydra's ConfigStore and the resolvers in OmegaConf, both process-wide: once a process, as
    making the schemas' nodes costs ~50 ms, and a forked command or a test's composition calls this again."""
    cs = ConfigStore.instance()
    made = cs.repo.get("config_schema.yaml")
    if made is not None and OmegaConf.get_type(made.node) is Config and OmegaConf.has_resolver("entrants"):
        return
    cs.store(name="config_schema", node=Config)
    for group, nodes in SCHEMAS.items():
        for name, node in nodes.items():
            cs.store(group=f"schema/{group}", name=name, node=node)

    OmegaConf.register_new_resolver("store_sibling", store_sibling, replace=True)  # sweeps/tune_sgd.yaml's storage
    OmegaConf.register_new_resolver("fresh_seeds", fresh_seeds, replace=True)  # sweeps/parity_challenge.yaml's seeds
    OmegaConf.register_new_resolver("entrants", entrants, replace=True)  # ... and its solvers
