"""The sweeper's config, registered as `hydra/sweeper=optuna`. Hydra scans this module at start-up: no optuna
import here."""
# No `from __future__ import annotations`: Hydra execs scanned modules outside sys.modules, where dataclasses
# cannot resolve string annotations.

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class OptunaSweeperConf:
    _target_: str = "hydra_plugins.optuna_search.sweeper.OptunaSweeper"
    _recursive_: bool = False  # the sweeper builds the sampler itself (its seed moves on when a study resumes)
    # metric name -> maximize | minimize, read from each job's return value (a mapping of metrics, or an
    # object with a `metrics` mapping); two or more: a multi-objective study with a Pareto front
    objectives: Dict[str, str] = field(default_factory=dict)
    # search space: key -> choice(...), range(...), interval(...), tag(log, interval(...)), a,b,c; a plain value
    # is fixed. Sweeps on the command line join (and override) these.
    params: Dict[str, str] = field(default_factory=dict)
    # an optuna.samplers class as a _target_ node (e.g. optuna.samplers.NSGAIISampler); null: Optuna's default.
    # A seed is offset by the trials the study already has, so a resumed study does not draw the same points again
    sampler: Any = None
    study_name: Optional[str] = None  # null: hydra.job.name
    # Optuna storage URL (sqlite:///path/optuna.db, a database server); the study is loaded if it exists, so
    # re-running resumes it. null: in memory (no resume)
    storage: Optional[str] = None
    n_trials: int = 20  # the study's budget: a re-run runs what is left of it (raise it to search further)
    n_jobs: int = 2  # trials launched together, as one batch of the launcher
    # a config key that receives each trial's number (e.g. extra.trial), so every trial is a distinct job
    # (recorded, never skipped as already done); null: none
    trial_key: Optional[str] = None


ConfigStore.instance().store(group="hydra/sweeper", name="optuna", node=OptunaSweeperConf, provider="optuna_search")
