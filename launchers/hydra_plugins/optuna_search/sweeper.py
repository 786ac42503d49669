"""`hydra/sweeper=optuna`: search instead of a grid, on Optuna's ask-and-tell interface.

Each batch asks the study for `n_jobs` trials, turns their sampled values into override lists, and hands the
batch to whatever launcher is configured (`launcher.launch`), so trials are that launcher's jobs: recorded,
isolated and run in parallel like any other sweep's. Each finished job is told to the study with the values
of the `objectives` it returned (metrics by name); a failed job is told as failed, and a finished one without
those metrics stops the search after its batch (a misspelt objective). With a `storage` (Optuna's own, e.g.
sqlite next to the app's store) the study is loaded if it exists: a re-run runs only what is left of `n_trials`,
and first re-enqueues the trials a killed run left RUNNING (one sweeper process per study). At the end
`optimization_results.yaml` in the sweep dir lists the best trial, or the Pareto front of a multi-objective study.

Generic: nothing here knows the app; Optuna is imported when a sweep starts, not when Hydra scans plugins.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Mapping
from difflib import get_close_matches
from pathlib import Path
from typing import Any, NoReturn, Optional

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.optuna_search._space import SpaceError, as_override, holds, parse, points
from hydra_plugins.sweep_launcher.api import JOBS_IN_SWEEP

log = logging.getLogger(__name__)
DIRECTIONS = ("maximize", "minimize")


class OptunaSweeper(Sweeper):
    def __init__(
        self,
        objectives: Mapping[str, str],
        params: Mapping[str, str],
        sampler: Any = None,
        study_name: Optional[str] = None,
        storage: Optional[str] = None,
        n_trials: int = 20,
        n_jobs: int = 2,
        trial_key: Optional[str] = None,
    ) -> None:
        self.objectives = dict(objectives or {})
        self.params = {str(k): str(v) for k, v in (params or {}).items()}
        self.sampler, self.study_name, self.storage = sampler, study_name, storage
        self.n_trials, self.n_jobs, self.trial_key = int(n_trials), int(n_jobs), trial_key
        self.config: Optional[DictConfig] = None
        self.launcher: Any = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins  # noqa: PLC0415 - Hydra's plugin registry: when the sweeper is set up, not at plugin scan

        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    # -- before any job ---------------------------------------------------------------------------
    def _refuse(self, msg: str, code: int = 2) -> NoReturn:
        """Bad sweeper settings: one line naming the field, exit 2 (1: a storage that cannot be reached), before
        any trial exists."""
        print(f"optuna sweeper: {msg}", file=sys.stderr, flush=True)
        raise SystemExit(code)

    def _check(self) -> None:
        if not self.objectives:
            self._refuse(
                "hydra.sweeper.objectives is empty: expected metric -> maximize|minimize, e.g. {accuracy: maximize}"
            )
        for name, d in self.objectives.items():
            if d not in DIRECTIONS:
                self._refuse(
                    f"hydra.sweeper.objectives.{name}={d!r} is not allowed: expected one of {', '.join(DIRECTIONS)}"
                )
        for field, v in (("n_trials", self.n_trials), ("n_jobs", self.n_jobs)):
            if v < 1:
                self._refuse(f"hydra.sweeper.{field}={v} is not allowed: expected an integer >= 1")

    def _study(self) -> Any:
        import optuna  # noqa: PLC0415 - optuna: the [optuna] extra, imported when a search runs

        assert self.config is not None
        name = self.study_name or str(self.config.hydra.job.name)
        if self.storage and self.storage.startswith("sqlite:///"):
            Path(self.storage[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        directions = list(self.objectives.values())
        try:  # a storage with no scheme, an SQLite file that cannot be made: SQLAlchemy's tracebacks (51-141 lines)
            study = optuna.create_study(
                storage=self.storage, study_name=name, directions=directions, load_if_exists=True
            )
        except Exception as e:  # noqa: BLE001 - SQLAlchemy's and Optuna's errors: said in one line
            bad_url = type(e).__name__ == "ArgumentError" or isinstance(e, ValueError)
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            self._refuse(
                f"hydra.sweeper.storage={self.storage} cannot be opened ({why}): expected an Optuna storage URL "
                "(sqlite:///path/optuna.db, a database server's) that can be written, or null",
                2 if bad_url else 1,
            )
        if self.sampler is not None:
            study.sampler = self._sampler(len(study.trials))
        if isinstance(study.sampler, (optuna.samplers.GridSampler, optuna.samplers.BruteForceSampler)):
            # they stop the study themselves, which Optuna allows only inside study.optimize
            self._refuse(
                f"hydra.sweeper.sampler={type(study.sampler).__name__} is not supported (it stops the "
                "study from inside Optuna's optimize loop): for a grid use the basic sweeper (a,b,c)"
            )
        if [d.name.lower() for d in study.directions] != directions:
            self._refuse(
                f"study {name!r} in {self.storage} has directions "
                f"{[d.name.lower() for d in study.directions]}, hydra.sweeper.objectives asks {directions}: "
                "use another hydra.sweeper.study_name"
            )
        return study

    def _sampler(self, n_before: int) -> Any:
        """The configured sampler; its seed offset by the study's trials so far (deterministic, and a resumed
        study goes on drawing new points instead of repeating the first run's)."""
        from hydra.utils import instantiate  # noqa: PLC0415 - at set-up: the plugin scan imports this module for every Hydra command

        node = OmegaConf.to_container(self.sampler, resolve=True) if isinstance(self.sampler, DictConfig) else None
        node = node if node is not None else (dict(self.sampler) if isinstance(self.sampler, Mapping) else None)
        if not isinstance(node, dict) or "_target_" not in node:  # `sampler=bogus` was a ValueError's traceback
            self._refuse(
                f"hydra.sweeper.sampler={self.sampler} is not allowed: expected an optuna.samplers class as a node, "
                "e.g. +hydra.sweeper.sampler._target_=optuna.samplers.TPESampler, or null (Optuna's default)"
            )
        if node.get("seed") is not None:
            node["seed"] = int(node["seed"]) + n_before
        try:
            return instantiate(node)
        except Exception as e:  # noqa: BLE001 - Hydra's instantiation error (no such class, a wrong argument)
            why = (str(e).splitlines()[0] if str(e) else type(e).__name__).split(", set env var HYDRA_FULL_ERROR")[0]
            self._refuse(f"hydra.sweeper.sampler cannot be made ({why}): expected an optuna.samplers class")

    # -- the search -------------------------------------------------------------------------------
    def sweep(self, arguments: list[str]) -> list[list[JobReturn]]:
        import optuna  # noqa: PLC0415 - optuna: the [optuna] extra, imported when a search runs
        from optuna.trial import TrialState  # noqa: PLC0415 - optuna: the [optuna] extra, imported when a search runs

        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        self._check()
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        try:
            space, fixed = parse(self.params, arguments, parser)
        except SpaceError as e:
            self._refuse(f"hydra.sweeper.params.{e}")
        if not space:
            self._refuse(
                "nothing to search: hydra.sweeper.params (or the command line) has no "
                "choice(...), range(...), interval(...) or a,b,c"
            )
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = self._study()
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            # left RUNNING by a run that was killed: failed, and tried again first
            study.tell(t.number, state=TrialState.FAIL)
            study.enqueue_trial(t.params, skip_if_exists=False)
        done = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
        todo = max(0, self.n_trials - done)
        log.info(f"optuna: study {study.study_name}: {done} trial(s) done, {todo} to run of n_trials={self.n_trials}")
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        returns: list[list[JobReturn]] = []
        size = points(space)  # a finite space: once each point has a finished trial, more trials only repeat one
        if size is not None and todo > size:
            log.info(f"optuna: the search space holds {size} point(s): the search ends once each has finished")
        setattr(self.launcher, JOBS_IN_SWEEP, min(todo, size) if size is not None else todo)  # its progress's total
        while todo > 0 and (size is None or self._finished_points(study, space) < size):
            trials = [study.ask(space) for _ in range(min(self.n_jobs, todo))]
            batch = [self._overrides(t, fixed) for t in trials]
            self.validate_batch_is_legal(batch)
            results = list(self.launcher.launch(batch, initial_job_idx=trials[0].number))
            for trial, ret in zip(trials, results):
                values, why = self._values(ret)
                if values is None:
                    log.warning(f"optuna: trial {trial.number} failed: {why}")
                    study.tell(trial, state=TrialState.FAIL)
                else:
                    study.tell(trial, values)
            returns.append(results)
            todo -= len(trials)
            if (unknown := self._unknown_objectives(results)) is not None:
                self._write_results(study, sweep_dir)
                self._refuse(unknown)
        self._write_results(study, sweep_dir)
        return returns

    def _unknown_objectives(self, results: list[JobReturn]) -> Optional[str]:
        """Why the search stops after a batch: an objective no job returns (a misspelt name failed every trial, the
        command then exiting 0 with '0 of N complete'), said once a job has finished and returned its metrics."""
        for ret in results:
            metrics = self._metrics(ret) if ret.status == JobStatus.COMPLETED else None
            if isinstance(metrics, Mapping):
                missing = [m for m in self.objectives if m not in metrics]
                if not missing:
                    return None
                near = get_close_matches(missing[0], list(metrics), 1)
                return (
                    f"hydra.sweeper.objectives.{missing[0]}: no job returns a metric {missing[0]}"
                    + (f" (did you mean {near[0]}?)" if near else "")
                    + f"; its metrics: {', '.join(sorted(metrics)) or 'none'}; the search stopped after its first "
                    "batch"
                )
        return None

    @staticmethod
    def _metrics(ret: JobReturn) -> Any:
        value = ret.return_value
        return value if isinstance(value, Mapping) else getattr(value, "metrics", None)

    @staticmethod
    def _finished_points(study: Any, space: dict[str, Any]) -> int:
        """How many distinct points of `space` have a finished trial (a failed one may be tried again)."""
        from optuna.trial import TrialState  # noqa: PLC0415 - optuna: the [optuna] extra, imported when a search runs

        finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
        return len({tuple(sorted(t.params.items())) for t in finished if holds(space, t.params)})

    def _overrides(self, trial: Any, fixed: list[str]) -> list[str]:
        out = [*fixed, *(as_override(k, v) for k, v in trial.params.items())]
        if self.trial_key:
            out.append(f"++{self.trial_key}={trial.number}")
        return out

    def _values(self, ret: JobReturn) -> tuple[Optional[list[float]], str]:
        """The objectives' values from a job's return value, or (None, why not)."""
        if ret.status != JobStatus.COMPLETED:
            return None, f"the job failed: {ret._return_value!r}"  # noqa: SLF001 - FAILED: return_value raises
        value = ret.return_value
        metrics = self._metrics(ret)
        if not isinstance(metrics, Mapping):
            return None, (
                f"the job returned {type(value).__name__}, not metrics (a mapping, or an object with a "
                "`metrics` mapping); a launcher returns nothing for a job it skipped as already done: "
                "set hydra.sweeper.trial_key"
            )
        missing = [m for m in self.objectives if m not in metrics]
        if missing:
            return None, f"no metric {', '.join(missing)} among {', '.join(sorted(metrics)) or 'none'}"
        values = [float(metrics[m]) for m in self.objectives]
        if not all(math.isfinite(v) for v in values):
            return None, f"objective values {values} are not finite"
        return values, ""

    def _write_results(self, study: Any, sweep_dir: Path) -> None:
        """optimization_results.yaml: the best trial (one objective) or the Pareto front (several)."""
        from optuna.trial import TrialState  # noqa: PLC0415 - optuna: the [optuna] extra, imported when a search runs

        names = list(self.objectives)
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        front = study.best_trials if complete else []
        out = {
            "name": "optuna",
            "study": study.study_name,
            "storage": self.storage,
            "objectives": dict(self.objectives),
            "trials": len(study.trials),
            "complete": len(complete),
            "pareto_front": [
                {"number": t.number, "params": dict(t.params), "values": dict(zip(names, t.values))}
                for t in sorted(front, key=lambda t: t.number)
            ],
        }
        OmegaConf.save(OmegaConf.create(out), sweep_dir / "optimization_results.yaml")
        print(
            f"optuna: study {study.study_name}: {len(complete)} of {len(study.trials)} trial(s) complete; "
            f"{'best' if len(names) == 1 else 'Pareto front'}: "
            + (
                "; ".join(
                    f"#{t['number']} " + ", ".join(f"{k}={v:.4g}" for k, v in t["values"].items())
                    for t in out["pareto_front"]
                )
                or "none"
            ),
            flush=True,
        )
