"""Launcher configs, registered under `hydra/launcher`: `sweep` (the app's hooks place each job), `local`, `modal`.

Hydra scans this module at start-up: it must stay light (no mlflow, modal or rich imports here).
"""
# No `from __future__ import annotations`: Hydra execs scanned modules outside sys.modules, where
# dataclasses cannot resolve string annotations.

import sys
import types
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore

TARGET = "hydra_plugins.sweep_launcher.launcher.SweepLauncher"


@dataclass
class ModalConf:
    # offline: run the very same worker function through modal's Function.local() on this machine's worker
    # pool, no network (also on with SWEEP_MODAL_OFFLINE=1)
    offline: bool = False
    app_name: str = "sweep"
    timeout: int = 3600  # seconds per job (modal Function timeout)
    retries: int = 0  # modal Function retries
    max_containers: int = 8  # modal Function max_containers: jobs running at once on Modal
    python_version: Optional[str] = None  # container Python; null: this interpreter's major.minor
    # price table (USD per GPU-hour by Modal gpu type), read by the app's hooks (the sweep app's cost); null:
    # the app's default table
    prices: Optional[str] = None


@dataclass
class SweepLauncherConf:
    _target_: str = TARGET
    route: str = "device"  # device: where the app's plan places each job (sweep: cuda jobs to Modal) | local | modal
    n_workers: Optional[int] = None  # local worker processes, >= 1; null: CPU count
    force: bool = False  # re-run jobs that already have a FINISHED run with the same resolved config
    # the most jobs solved together in one worker task (one local worker, one Modal container): jobs the app's
    # plan keys alike (JobPlan.batch_key); each is still its own job. 1: every job alone; null: what the app's
    # plan says (JobPlan.batch: an app's presets may turn batching on), else 1
    batch: Optional[int] = None
    progress: bool = True  # live done / failed / running / ETA line (rich) on stderr
    # the most seconds a job may run on a local worker (a batch of R jobs: R times it); past it the worker is killed
    # and the job FAILED with the reason (a batch's jobs run again one at a time, so only the slow one fails). null:
    # what the app's plan says (JobPlan.time_limit_s: a preset's), else no limit
    time_limit_s: Optional[float] = None
    # modules each local worker imports when it starts, while the launcher composes: the first job of a
    # worker then pays no import time (nor counts it as the job's CPU seconds); missing ones are skipped
    # (the app's hooks add their own: LaunchHooks.preload)
    preload: List[str] = field(default_factory=list)
    # fast paths (they reproduce Hydra; gated): compose each distinct set of group choices once, then apply a
    # job's value overrides (_fast/compose.py), and the lean run_job (_fast/run_job.py). null: on where the Hydra and
    # OmegaConf versions were tested (_fast.TESTED_HYDRA, TESTED_OMEGACONF), else Hydra's public
    # load_sweep_config and run_job; false: always the public path
    fast: Optional[bool] = None
    modal: ModalConf = field(default_factory=ModalConf)
    # an app's own places to run jobs (backends.Backend): name -> its config with `_target_`, made once per sweep;
    # route=<name> sends every job there (docs/extending.md, "Add a launcher backend")
    backends: Dict[str, Any] = field(default_factory=dict)


@dataclass
class LocalLauncherConf(SweepLauncherConf):
    route: str = "local"


@dataclass
class ModalLauncherConf(SweepLauncherConf):
    route: str = "modal"


ConfigStore.instance().store(group="hydra/launcher", name="sweep", node=SweepLauncherConf, provider="sweep")
ConfigStore.instance().store(group="hydra/launcher", name="local", node=LocalLauncherConf, provider="sweep")
ConfigStore.instance().store(group="hydra/launcher", name="modal", node=ModalLauncherConf, provider="sweep")

# Hydra's plugin scan execs this file without registering it in sys.modules (and may exec it again, with new
# classes in the ConfigStore). Register this execution: cloudpickle then ships configs holding these classes
# by reference; by value, one job's hydra config took ~0.1-0.4 s to pickle.
if (
    sys.modules.get(__name__) is None
    or getattr(sys.modules[__name__], "SweepLauncherConf", None) is not SweepLauncherConf
):
    _module = types.ModuleType(__name__)
    _module.__dict__.update(globals())
    sys.modules[__name__] = _module
