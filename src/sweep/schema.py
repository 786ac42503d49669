"""Structured-config schemas: every config group option is backed by a dataclass here, so a misspelt key
or a wrong type fails when Hydra composes the config, before any job starts.

Option yaml files in conf/<group>/ start from their schema with
``defaults: [/schema/<group>@_here_: <schema name>, _self_]`` and set only what differs from it. A schema's
fields and defaults are its class's (tests/test_shape.py keeps the two equal). Value rules that a type cannot
express (k_sparse <= n_bits, lr > 0, ...) are checked in sweep.validate.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class ProblemConfig:
    _target_: str = "sweep.problems.sparse_parity.SparseParity"
    name: str = "sparse_parity"
    n_bits: int = 20
    k_sparse: int = 3
    n_train: int = 1000
    n_test: int = 200
    seed: int = 42


@dataclass
class MethodConfig:
    _target_: str = MISSING
    name: str = MISSING


@dataclass
class SGDConfig(MethodConfig):
    _target_: str = "sweep.methods.sgd.SGD"
    name: str = "sgd"
    hidden: int = 200
    lr: float = 0.1
    wd: float = 0.01
    batch_size: int = 32
    max_epochs: int = 200
    target_accuracy: float = 1.0


@dataclass
class GF2Config(MethodConfig):
    _target_: str = "sweep.methods.gf2.GF2"
    name: str = "gf2"
    max_rows: int = 0


@dataclass
class KMConfig(MethodConfig):
    _target_: str = "sweep.methods.km.KM"
    name: str = "km"
    influence_samples: int = 5


@dataclass
class SignSGDConfig(SGDConfig):
    _target_: str = "sweep.methods.sign_sgd.SignSGD"
    name: str = "sign_sgd"
    lr: float = 0.01
    dead_zone: float = 1e-12  # |grad| at or below this counts as zero (rounding noise has no sign)


@dataclass
class CurriculumConfig(SGDConfig):
    _target_: str = "sweep.methods.curriculum.Curriculum"
    name: str = "curriculum"
    # input widths trained on before problem.n_bits (widths >= n_bits are skipped; n_bits always ends it)
    schedule: list[int] = field(default_factory=lambda: [10, 30])
    widen_scale: float = 0.01  # std of the new W1 columns added when the input widens


@dataclass
class FourierConfig(MethodConfig):
    _target_: str = "sweep.methods.fourier.Fourier"
    name: str = "fourier"
    max_subsets: int = 2_000_000  # refuse (at config time) when C(n_bits, k_sparse) exceeds this
    chunk: int = 2048  # subsets correlated per batched operation (bounds memory)


@dataclass
class OLSConfig(MethodConfig):
    _target_: str = "sweep.methods.ols.OLS"
    name: str = "ols"


@dataclass
class SMTConfig(MethodConfig):
    _target_: str = "sweep.methods.smt.SMT"
    name: str = "smt"
    screen_rows: int = 0  # rows a candidate must fit before the full check; 0: 2 log2 C(n, k) + 16
    pair_block: int = 4_000_000  # elements per batched pair extension (bounds memory at large n)


@dataclass
class ForwardForwardConfig(MethodConfig):
    _target_: str = "sweep.methods.forward_forward.ForwardForward"
    name: str = "forward_forward"
    hidden: int = 64
    layers: int = 2
    lr: float = 0.3
    threshold: float = 1.0  # goodness (mean squared activation) that separates positive from negative
    batch_size: int = 32
    max_epochs: int = 200
    target_accuracy: float = 1.0


@dataclass
class VariantConfig:
    _target_: str = "sweep.variants.standard.Standard"
    name: str = "standard"
    tile_size: int = 0


@dataclass
class TrackerConfig:
    # null _target_: tracker=none, no trace is recorded at all
    _target_: Optional[str] = None
    name: str = "none"
    # published: one single-sample step on the first training sample with margin < 1, after training
    # (seed 001); init_sample0: one step on sample 0 at the initial weights (seed 003); all_steps: every step
    scope: str = "published"
    cache_size_floats: int = 16384


@dataclass
class EnergyTrackerConfig(TrackerConfig):
    # a file conf/energy/<hierarchy>.yaml (sweep.trackers.hierarchy); the three below override it key by key
    hierarchy: str = "cpu"
    levels: dict[str, Any] = field(default_factory=dict)
    ops_pj: dict[str, Any] = field(default_factory=dict)
    bytes_per_float: Optional[int] = None
    meter: str = "auto"  # measured energy (sweep.meter): auto (NVML on cuda, RAPL on a Linux CPU) | none
    meter_window_s: float = 1.0  # the measured solves are repeated until the window is at least this long


@dataclass
class DeviceConfig:
    name: str = "cpu"
    backend: str = "numpy"  # numpy | torch
    torch_device: str = "cpu"  # torch device string when backend=torch
    dtype: str = "float64"  # float64: the seeds' precision; float32: faster, see README "float32 on CPU"
    compile: bool = False  # torch.compile the hot step (seed 004)
    compile_backend: str = "inductor"  # torch.compile backend: inductor, or aot_eager (no C++ codegen)
    # torch.compile mode (seed 004 tunes with max-autotune) and fullgraph=True (no graph breaks back to Python)
    compile_mode: str = "default"
    fullgraph: bool = False
    # mixed precision for the hot step: none, or torch.autocast to float16 / bfloat16 (seed 004's fp16 matmuls)
    autocast: str = "none"
    threads: int = 0  # CPU threads of torch's intra-op pool and numpy's BLAS; 0: the libraries' defaults
    # USD per hour of this device; cost_usd = wall_clock_s * price_per_hour / 3600
    price_per_hour: float = 0.0
    gpu: Optional[str] = None  # Modal GPU type (L4, A10G, A100, H100, ...) for cuda jobs
    local_gpu: bool = False  # run cuda jobs on this machine's GPU instead of Modal


@dataclass
class MLflowConfig:
    tracking_uri: Optional[str] = None  # null: the project's store, <project>/mlruns (or $MLFLOW_TRACKING_URI)
    experiment: str = "sweep"
    enabled: bool = True
    # under Hydra's own and other launchers (submitit): re-run jobs that already have a FINISHED run (the
    # project's launcher has hydra.launcher.force)
    force: bool = False


@dataclass
class CompareConfig:
    """How `python -m sweep.compare` reads a preset's study (set in sweeps/<study>.yaml; jobs ignore it)."""

    baseline: dict[str, Any] = field(default_factory=dict)  # swept key -> value of the baseline arm
    relative: dict[str, str] = field(default_factory=dict)  # metric -> percent | speedup, against the baseline
    # proxy ranking (sweep.proxies): {target: [metric, ...], by: a swept key, metrics: [proxy, ...]}
    proxies: dict[str, Any] = field(default_factory=dict)


@dataclass
class Config:
    problem: ProblemConfig = MISSING
    method: MethodConfig = MISSING
    variant: VariantConfig = MISSING
    device: DeviceConfig = MISSING
    tracker: TrackerConfig = MISSING
    mlflow: MLflowConfig = field(default_factory=MLflowConfig)
    run_name: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)
    compare: CompareConfig = field(default_factory=CompareConfig)


SCHEMAS: dict[str, dict[str, type]] = {
    "problem": {"problem": ProblemConfig},
    "method": {"sgd": SGDConfig, "gf2": GF2Config, "km": KMConfig, "sign_sgd": SignSGDConfig,
               "curriculum": CurriculumConfig, "fourier": FourierConfig, "smt": SMTConfig,
               "forward_forward": ForwardForwardConfig, "ols": OLSConfig},
    "variant": {"variant": VariantConfig},
    "device": {"device": DeviceConfig},
    "tracker": {"tracker": TrackerConfig, "energy": EnergyTrackerConfig},
}
JOB_GROUPS: tuple[str, ...] = tuple(SCHEMAS)  # the groups a job is made of: problem, method, variant, ...


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)
    for group, nodes in SCHEMAS.items():
        for name, node in nodes.items():
            cs.store(group=f"schema/{group}", name=name, node=node)
    from omegaconf import OmegaConf

    from sweep.paths import store_sibling

    OmegaConf.register_new_resolver("store_sibling", store_sibling, replace=True)  # sweeps/tune_sgd.yaml's storage
