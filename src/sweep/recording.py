"""Hydra callback that records jobs in MLflow when Hydra itself runs them (single runs, and multiruns on
Hydra's basic launcher). Under the project's launcher the same object is the launcher's hooks
(`sweep.launch_hooks`): it records there, in the launching process, and stands aside in the workers.

A result the store refuses is kept in the spool (`sweep.spool`) and the command exits 1 with one line naming the
store, the cause and the spool file; a store that cannot be written is found before a multirun starts a job.

Under a launcher that runs jobs in other processes (submitit: local processes or SLURM jobs) this callback
travels with Hydra's context: the launching process opens the parent run, each job's process writes its own
child run into the shared store (its open store connection stays behind: see __getstate__), and the launching
process closes the parent with the totals of the children the store holds, the same metrics the project's
launcher writes. Re-running such a sweep skips jobs whose resolved config already has a FINISHED run
(`already_done`; mlflow.force=true re-runs them), as the project's launcher does; each skip is a tag on the
parent (`sweep.skipped.<job num>`), written by the job's process. A grid is checked before any job starts
(`refuse_bad_jobs`); a search's job is checked where it runs, and if refused it is a tag on the parent too
(`sweep.refused.<job num>`), listed with the sweep's failures."""
from __future__ import annotations

import atexit
import os
import sys
import time
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from hydra_plugins.sweep_launcher.hooks import Tally

from sweep.launch_hooks import (FORCE_KEY, SweepLaunchHooks, charge_cpu, failed_result, is_sweep_job,
                                open_parent)
from sweep.result import RunResult
from sweep.errors import ConfigError

OWN_LAUNCHER_PREFIX = "hydra_plugins.sweep_launcher"
SKIPPED_TAG = "sweep.skipped."  # + the job's number, on the parent: a job skipped as already done
REFUSED_TAG = "sweep.refused."  # + the job's number, on the parent: "<job>: config error: ..." (no run)


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


def refuse_bad_jobs(config: DictConfig) -> None:
    """Under Hydra's basic sweeper on a launcher other than the project's: every job of the grid composed and
    checked before any starts, as the project's launcher does (a bad one: one line naming the field, exit 2).
    The grid is the basic sweeper's: hydra.sweeper.params, then the command line, one value list per key."""
    if not str(OmegaConf.select(config, "hydra.sweeper._target_", default="")).endswith(".BasicSweeper"):
        return  # other sweepers (optuna) make jobs as they go: those are checked where they run
    import itertools

    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra_plugins.sweep_launcher.naming import Namer

    from sweep.job import job_config
    from sweep.validate import validate

    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    lines = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    loader = GlobalHydra.instance().config_loader()
    grid: dict[str, list[str]] = {}
    for o in OverridesParser.create(config_loader=loader).parse_overrides(lines):
        key = o.get_key_element()
        grid[key] = ([f"{key}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
                     else [f"{key}={o.get_value_element_as_str()}"])
    namer = Namer.for_multirun(config.hydra)
    here = "slurm" not in launcher_name(config)  # basic and submitit_local run the jobs on this machine
    for idx, job in enumerate(itertools.product(*grid.values())):
        cfg = loader.load_sweep_config(config, list(job))
        if not is_sweep_job(cfg):
            return
        try:
            validate(job_config(cfg), runs_here=here)
        except ConfigError as e:  # the job named as the project's launcher names it: by what the sweep varies
            print(f"sweep: config error in job {namer.names([list(job)], [idx])[0]}: {e}", file=sys.stderr,
                  flush=True)
            sys.exit(2)


def already_done(cfg: DictConfig) -> str | None:
    """In a job of a multirun under a launcher other than the project's (which skips done jobs before they
    start): the id of a FINISHED run with this job's resolved config, so the job can be skipped; None to run it."""
    from hydra.core.hydra_config import HydraConfig

    hydra_cfg = HydraConfig.get()  # a job's own config has no hydra section
    if (hydra_cfg.mode != RunMode.MULTIRUN or str(hydra_cfg.launcher.get("_target_", "")).startswith(OWN_LAUNCHER_PREFIX)
            or not cfg.mlflow.enabled or OmegaConf.select(cfg, FORCE_KEY, default=False) or not is_sweep_job(cfg)):
        return None
    from sweep.job import job_config
    from sweep.recorder import shared_recorder

    return shared_recorder(cfg.mlflow.tracking_uri, cfg.mlflow.experiment).finished_run(job_config(cfg))


REPEAT_OF_TAG = "sweep.repeat_of"  # on a single run recorded again (mlflow.force=true): the run it repeats


def resume_single_run(cfg: DictConfig) -> str | None:
    """A single run's resume, as a sweep resumes its jobs: when its resolved config already has a FINISHED run,
    say so and show that run (its line, where to see it), and return None: nothing runs or is recorded. With
    mlflow.force=true it runs again as the next repeat of that config: `extra.repeat` (1, 2, ...; the presets'
    repeat index) is set in `cfg`, so the new run has its own identity and name; the repeated run's id is
    returned (for REPEAT_OF_TAG). A first run (or one without a store to read) returns "". A config that cannot
    run raises ConfigError first."""
    from sweep.job import job_config
    from sweep.recorder import shared_recorder
    from sweep.validate import validate

    if not cfg.mlflow.enabled or not is_sweep_job(cfg):
        return ""
    config = job_config(cfg)
    validate(config, runs_here=True)  # bad input is refused before the store is opened (or made)
    try:
        recorder = shared_recorder(cfg.mlflow.tracking_uri, cfg.mlflow.experiment)
        done = recorder.finished_run(config)
    except Exception:  # noqa: BLE001 - a store that cannot be read: the job runs, its recording says why
        return ""
    if done is None:
        return ""
    if OmegaConf.select(cfg, FORCE_KEY, default=False):
        repeat = int(config.get("extra", {}).get("repeat", 0))
        while True:
            repeat += 1
            if recorder.finished_run({**config, "extra": {**config.get("extra", {}), "repeat": repeat}}) is None:
                break
        with open_dict(cfg):
            cfg.extra.repeat = repeat
        return done
    from hydra_plugins.sweep_launcher.commands import this_command

    from sweep.ui import run_hint

    run = recorder.client.get_run(done)
    line = RunResult(config={}, metrics=dict(run.data.metrics), status=run.info.status, run_id=done)
    print(f"sweep: already recorded, not run again ({FORCE_KEY}=true records a repeat: "
          f"{this_command(f'{FORCE_KEY}=true')})\n{line.summary(run.info.run_name)}\n"
          f"{run_hint(recorder.tracking_uri, recorder.experiment_id, done)}", flush=True)
    return None


class MLflowCallback(SweepLaunchHooks):
    def __init__(self) -> None:
        self.recorder: Any = None
        self.parent: str | None = None
        self.results: list[RunResult] = []
        self.namer: Any = None  # multiruns: a job is named by what it varies (the launcher's naming)
        self.unrecorded = 0
        self.launching_pid: int | None = None  # the process that opened the parent (and alone closes it)
        self.t0 = 0.0
        self.cpu0 = 0.0  # at the job's start, in the process that runs it

    def _recorder(self, config: DictConfig):
        if self.recorder is None:
            from sweep.recorder import shared_recorder

            self.recorder = shared_recorder(config.mlflow.tracking_uri, config.mlflow.experiment)
        return self.recorder

    def __getstate__(self) -> dict[str, Any]:
        # A launcher that pickles Hydra's context (submitit) takes this callback to the jobs: everything but the
        # open store (an MLflow client holds weak references; a job opens its own from mlflow.tracking_uri).
        state = super().__getstate__()
        return {k: v for k, v in (state or {}).items() if k != "recorder"}

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
        if launched_by_own_launcher(config):
            return
        refuse_bad_jobs(config)
        if not config.mlflow.enabled:
            return
        from hydra_plugins.sweep_launcher.naming import Namer

        self.namer = Namer.for_multirun(config.hydra)
        try:
            self.parent = open_parent(self._recorder(config), config, launcher_name(config), launcher_params(config))
        except store.StoreError as e:
            print(f"sweep: {e}", file=sys.stderr, flush=True)
            sys.exit(1)
        self.launching_pid, self.t0 = os.getpid(), time.perf_counter()
        # Hydra's basic sweeper raises a batch's failure and on_multirun_end never comes: close then, at exit
        atexit.register(self._close_at_exit, config)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.cpu0 = time.process_time()

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if launched_by_own_launcher(config):
            return
        cpu_s = time.process_time() - self.cpu0
        if not config.mlflow.enabled:
            if isinstance(job_return._return_value, RunResult):
                print(job_return._return_value.summary(), flush=True)
            return
        result: Any = None
        name, num = config.get("run_name"), OmegaConf.select(config, "hydra.job.num", default=None)
        if self.parent is not None and name is None and self.namer is not None:
            name = self.namer.names([list(config.hydra.overrides.task)], [num])[0]
        if job_return.status == JobStatus.COMPLETED:
            result = job_return.return_value
            if result is None and self.parent is not None and is_sweep_job(config):  # skipped: already done
                self._recorder(config).client.set_tag(self.parent, f"{SKIPPED_TAG}{num}", "true")
        elif isinstance(job_return._return_value, ConfigError):  # bad input: no run; the parent lists the job
            if self.parent is not None:
                self._recorder(config).client.set_tag(
                    self.parent, f"{REFUSED_TAG}{num}", f"{name}: config error: {job_return._return_value}"[:5000])
        else:
            job_cfg = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])
            result = failed_result(job_cfg, job_return._return_value)
        if isinstance(result, RunResult):
            tags = None
            if self.parent is not None:  # a sweep's job: tagged as the project's launcher tags it
                tags = {"sweep.route": launcher_name(config), "hydra.job.num": str(num)}
                if result.status == "FINISHED":
                    charge_cpu(result, config, cpu_s)
            self._record(config, result, name, tags)

    def _record(self, config: DictConfig, result: RunResult, run_name: str | None,
                tags: dict[str, str] | None = None) -> None:
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
                path = spool.keep(result, uri, config.mlflow.experiment, cause, parent_run_id=self.parent,
                                  run_name=run_name, extra_tags=tags)
                raise StoreError(uri, f"{cause}; {spool.kept(path)}") from None
            recorder.log(result, parent_run_id=self.parent, run_name=run_name, extra_tags=tags)
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
        if self.unrecorded:
            print(f"sweep: {self.unrecorded} result(s) not recorded (kept in the spool)", file=sys.stderr, flush=True)
        self._close(config)  # the summary; exit 1 when a job failed
        if self.unrecorded:
            sys.exit(1)

    def _close(self, config: DictConfig) -> None:
        """In the launching process, once: the parent's totals from the child runs the store holds (under
        submitit the jobs' processes wrote them), its status, the summary line and where to look next
        (`sweep_ended`, as under the project's launcher)."""
        if self.parent is None or os.getpid() != self.launching_pid:
            return
        atexit.unregister(self._close_at_exit)
        try:
            rec = self._recorder(config)
            parent = rec.client.get_run(self.parent)
            runs = rec.client.search_runs([rec.experiment_id], max_results=50000,
                                          filter_string=f"tags.`mlflow.parentRunId` = '{self.parent}'")
        except Exception:  # noqa: BLE001 - the store failed mid-sweep: its line is printed already
            if not self.unrecorded:
                raise
            return
        self.results = [RunResult(config={}, metrics=dict(r.data.metrics), status=r.info.status) for r in runs]
        tally = Tally(t0=self.t0, launcher={"name": launcher_name(config)}, force_key=FORCE_KEY)
        tally.done = sum(r.info.status == "FINISHED" for r in runs)
        tally.killed = sum(r.info.status == "KILLED" for r in runs)
        tally.skipped = sum(k.startswith(SKIPPED_TAG) for k in parent.data.tags)
        tally.failures = [(r.info.run_name, f"{r.info.status}: traceback.txt in run {r.info.run_id}")
                          for r in runs if r.info.status == "FAILED"]
        tally.failures += [tuple(v.split(": ", 1)) for k, v in sorted(parent.data.tags.items())
                           if k.startswith(REFUSED_TAG)]
        self.sweep_ended("FAILED" if tally.failures or self.unrecorded else "FINISHED", tally)

    def _close_at_exit(self, config: DictConfig) -> None:
        try:
            self._close(config)
        except SystemExit:
            pass  # failures: Hydra's sweeper raised the first one and the command exits 1 already
        except Exception as e:  # noqa: BLE001 - at exit: one line, not a traceback
            print(f"sweep: parent run {self.parent} not closed: {e}", file=sys.stderr, flush=True)


def launcher_name(config: DictConfig) -> str:
    """The Hydra launcher a multirun runs on (its config-group choice: basic, submitit_local, submitit_slurm)."""
    return str(OmegaConf.select(config, "hydra.runtime.choices", default={}).get("hydra/launcher", "basic"))


def launcher_params(config: DictConfig) -> dict[str, Any]:
    """The launcher's own settings (submitit: timeout_min, partition, ...) as the parent's params."""
    node = OmegaConf.to_container(config.hydra.launcher, resolve=True)
    return {f"launcher.{k}": v for k, v in node.items()
            if k != "_target_" and v is not None and not isinstance(v, (dict, list))}
