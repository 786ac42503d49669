"""Hydra callback that records jobs in MLflow when Hydra itself runs them (single runs, and multiruns on
Hydra's basic launcher). Under the project's launcher the same object is the launcher's hooks
(`sweep.launch_hooks`): it records there, in the launching process, and stands aside in the workers.

A result the store refuses is kept in the spool (`sweep.spool`) and the command exits 1 with one line naming the
store, the cause and the spool file; a store that cannot be written is found before a multirun starts a job."""
from __future__ import annotations

import sys
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from sweep.launch_hooks import SweepLaunchHooks, failed_result  # noqa: F401 - failed_result: used here
from sweep.result import RunResult
from sweep.validate import ConfigError

OWN_LAUNCHER_PREFIX = "hydra_plugins.sweep_launcher"


def launched_by_own_launcher(config: DictConfig) -> bool:
    # A single run (RUN mode) never goes through a launcher, whatever hydra/launcher is set to.
    if str(OmegaConf.select(config, "hydra.mode", default="")) != str(RunMode.MULTIRUN):
        return False
    target = OmegaConf.select(config, "hydra.launcher._target_", default="") or ""
    return str(target).startswith(OWN_LAUNCHER_PREFIX)


def refuse_bad_experiment(config: DictConfig) -> None:
    """mlflow.experiment is bad input when MLflow would refuse it: exit 2 before any job, whatever launches."""
    from sweep.store import experiment_name_problem

    if not config.mlflow.enabled:
        return
    problem = experiment_name_problem(config.mlflow.experiment)
    if problem:
        print(f"sweep: config error: {problem}", file=sys.stderr, flush=True)
        sys.exit(2)


class MLflowCallback(SweepLaunchHooks):
    def __init__(self) -> None:
        self.recorder: Any = None
        self.parent: str | None = None
        self.results: list[RunResult] = []
        self.namer: Any = None  # multiruns: a job is named by what it varies (the launcher's naming)
        self.unrecorded = 0

    def _recorder(self, config: DictConfig):
        if self.recorder is None:
            from sweep.recorder import Recorder

            self.recorder = Recorder(config.mlflow.tracking_uri, config.mlflow.experiment)
        return self.recorder

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse_bad_experiment(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from sweep import store
        from sweep.paths import default_tracking_uri

        refuse_bad_experiment(config)
        if config.mlflow.enabled:
            try:  # a store that cannot be written is found in milliseconds, before any launcher starts a job
                store.check(config.mlflow.tracking_uri or default_tracking_uri(), write=True)
            except store.StoreError as e:
                print(f"sweep: {e}", file=sys.stderr, flush=True)
                sys.exit(1)
        super().on_multirun_start(config, **kwargs)  # offers these hooks to the project's launcher
        if launched_by_own_launcher(config) or not config.mlflow.enabled:
            return
        from hydra_plugins.sweep_launcher.naming import Namer, sweep_overrides, swept_keys

        self.namer = Namer(swept_keys(sweep_overrides(config.hydra)))
        overrides = " ".join(OmegaConf.to_container(config.hydra.overrides.task))
        try:
            self.parent = self._recorder(config).start_parent(
                f"sweep {overrides}".strip(), {"sweep.overrides": overrides, "launcher": "basic"})
        except store.StoreError as e:
            print(f"sweep: {e}", file=sys.stderr, flush=True)
            sys.exit(1)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if launched_by_own_launcher(config):
            return
        if not config.mlflow.enabled:
            if isinstance(job_return._return_value, RunResult):
                print(job_return._return_value.summary(), flush=True)
            return
        result: Any = None
        if job_return.status == JobStatus.COMPLETED:
            result = job_return.return_value
        elif not isinstance(job_return._return_value, ConfigError):  # bad input: no run is created
            job_cfg = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])
            result = failed_result(job_cfg, job_return._return_value)
        if isinstance(result, RunResult):
            name = config.get("run_name")
            if name is None and self.namer is not None:
                name = self.namer.names([list(config.hydra.overrides.task)], [config.hydra.job.num])[0]
            self._record(config, result, name)
        if job_return.status != JobStatus.COMPLETED and self.parent is not None:
            # Hydra's basic sweeper raises after this batch and on_multirun_end never comes: close the parent
            # now (a later job's failure or on_multirun_end closes it again with the full picture).
            self.recorder.end_parent(self.parent, "FAILED", self.results)

    def _record(self, config: DictConfig, result: RunResult, run_name: str | None) -> None:
        from sweep import spool
        from sweep.store import StoreError

        try:
            try:
                recorder = self._recorder(config)
            except Exception as e:  # noqa: BLE001 - the store cannot be opened: keep the result, then say so
                from sweep.paths import default_tracking_uri
                from sweep.store import cause_of

                uri = getattr(e, "uri", None) or config.mlflow.tracking_uri or default_tracking_uri()
                cause = e.cause if isinstance(e, StoreError) else cause_of(e)
                path = spool.keep(result, uri, config.mlflow.experiment, cause, run_name=run_name)
                raise StoreError(uri, f"{cause}; {spool.KEPT.format(path=path)}") from None
            recorder.log(result, parent_run_id=self.parent, run_name=run_name)
        except StoreError as e:
            print(result.summary(run_name), flush=True)
            print(f"sweep: result not recorded: {e}", file=sys.stderr, flush=True)
            self.unrecorded += 1
            if str(OmegaConf.select(config, "hydra.mode", default="")) != str(RunMode.MULTIRUN):
                sys.exit(1)
            return
        self.results.append(result)
        print(result.summary(run_name), file=sys.stdout if result.status == "FINISHED" else sys.stderr, flush=True)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.tally is not None:  # the project's launcher drove these hooks: close as its hooks
            return super().on_multirun_end(config, **kwargs)
        if self.parent is not None:
            failed = any(r.status != "FINISHED" for r in self.results) or self.unrecorded
            try:
                self.recorder.end_parent(self.parent, "FAILED" if failed else "FINISHED", self.results)
            except Exception:  # noqa: BLE001 - the store failed mid-sweep: its line is printed already
                if not self.unrecorded:
                    raise
        if self.unrecorded:
            print(f"sweep: {self.unrecorded} result(s) not recorded (kept in the spool)", file=sys.stderr, flush=True)
            sys.exit(1)
        if self.parent is not None:
            from sweep.ui import next_steps

            r = self.recorder
            print(next_steps(r.client, r.tracking_uri, r.experiment_id, self.parent), flush=True)
