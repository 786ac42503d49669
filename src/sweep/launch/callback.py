"""Hydra callback that records jobs in MLflow when Hydra itself runs them (single runs, and multiruns on
Hydra's basic launcher). Under the project's launcher the same object is the launcher's hooks
(`sweep.launch.hooks`): it records there, in the launching process, and stands aside in the workers.

A result the store refuses is kept in the spool (`sweep.record.spool`) and the command exits 1 with one line naming the
store, the cause and the spool file; a store that cannot be written is found before a multirun starts a job.

Under a launcher that runs jobs in other processes (submitit: local processes or SLURM jobs) this callback
travels with Hydra's context: the launching process opens the parent run, each job's process writes its own
child run into the shared store (its open store connection stays behind: see __getstate__), and the launching
process closes the parent with the totals of the children the store holds, the same metrics the project's
launcher writes. Re-running such a sweep skips jobs whose resolved config already has a FINISHED run
(`already_done`; mlflow.force=true re-runs them), as the project's launcher does; each skip is a tag on the
parent (`sweep.skipped.<job num>`), written by the job's process. A grid is checked before any job starts
(`sweep.preflight`); a search's job is checked where it runs, and if refused it is a tag on the parent too
(`sweep.refused.<job num>`), listed with the sweep's failures."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import time
import traceback
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from hydra_plugins.sweep_launcher.api import Namer, Tally, output_closed, this_command
from sweep.errors import ConfigError
from sweep.job import job_config
from sweep.launch.hooks import SweepLaunchHooks, running_elsewhere
from sweep.paths import default_tracking_uri
from sweep.preflight.interpolations import check_interpolations
from sweep.preflight.job_dir import check_job_dir
from sweep.preflight.jobs import check_grid, check_not_empty, check_rules_of_round, check_single_run
from sweep.preflight.placement import check_slurm_here
from sweep.preflight.refusal import Refusal
from sweep.preflight.store import check_store
from sweep.record import claims, spool, store
from sweep.record.recorder import config_hash
from sweep.record.registry import open_store
from sweep.record.session import FORCE_KEY, SweepSession, bill_cpu, failed_result, is_sweep_job
from sweep.record.store import StoreError
from sweep.record.tags import JOB_NUM_TAG, REFUSED_TAG, ROUTE_TAG, SKIPPED_TAG
from sweep.report.ui import recorded_line, run_hint
from sweep.result import RunResult

OWN_LAUNCHER_PREFIX = "hydra_plugins.sweep_launcher"


def launched_by_own_launcher(config: DictConfig) -> bool:
    # A single run (RUN mode) never goes through a launcher, whatever hydra/launcher is set to.
    if str(OmegaConf.select(config, "hydra.mode", default="")) != str(RunMode.MULTIRUN):
        return False
    target = OmegaConf.select(config, "hydra.launcher._target_", default="") or ""
    return str(target).startswith(OWN_LAUNCHER_PREFIX)


def already_done(cfg: DictConfig) -> str | None:
    """In a job of a multirun under a launcher other than the project's (which skips done jobs before they
    start): the id of a FINISHED run with this job's resolved config, so the job can be skipped; None to run it."""

    hydra_cfg = HydraConfig.get()  # a job's own config has no hydra section
    if (
        hydra_cfg.mode != RunMode.MULTIRUN
        or str(hydra_cfg.launcher.get("_target_", "")).startswith(OWN_LAUNCHER_PREFIX)
        or not cfg.mlflow.enabled
        or OmegaConf.select(cfg, FORCE_KEY, default=False)
        or not is_sweep_job(cfg)
    ):
        return None

    return SweepSession().done_run(cfg, job_config(cfg))


def resume_single_run(cfg: DictConfig) -> str | None:
    """A single run's resume, as a sweep resumes its jobs: when its resolved config already has a FINISHED run,
    say so and show that run (its line, where to see it), and return None: nothing runs or is recorded. With
    mlflow.force=true it runs again as the next repeat of that config: `extra.repeat` (1, 2, ...; the presets'
    repeat index) is set in `cfg`, so the new run has its own identity and name; the repeated run's id is
    returned (for REPEAT_OF_TAG). A first run claims its config (`claims.hold`, released at exit): one that a
    sweep or single run running now holds is skipped, said, None. A first run (or one without a store to read)
    returns "". A config that cannot run raises ConfigError first."""
    if not cfg.mlflow.enabled or not is_sweep_job(cfg):
        return ""
    config = job_config(cfg)
    check_single_run(config)  # bad input is refused before the store is opened (or made)
    try:
        session = SweepSession()
        recorder = session.store(cfg)
        done = session.done_run(cfg, config)
    except Exception:  # noqa: BLE001 - a store that cannot be read: the job runs, its recording says why
        return ""
    force = bool(OmegaConf.select(cfg, FORCE_KEY, default=False))
    if done is None and not force:
        # claimed as a sweep claims its jobs: of two identical single runs at once, one runs and records
        try:
            holder, other = claims.hold(recorder, config_hash(config))
        except Exception:  # noqa: BLE001 - a store that cannot be written: the job runs, its recording says why
            return ""
        if other is not None:
            print(f"sweep: skipping the job: {running_elsewhere(other)}", flush=True)
            return None
        atexit.register(_drop_holder, recorder, holder)
        done = session.done_run(cfg, config)  # recorded by a run that ended between the first look and the claim
    if done is None:
        return ""
    if force:
        repeat = int(config.get("extra", {}).get("repeat", 0))
        while True:
            repeat += 1
            if session.done_run(cfg, {**config, "extra": {**config.get("extra", {}), "repeat": repeat}}) is None:
                break
        with open_dict(cfg):
            cfg.extra.repeat = repeat
        return done
    run = recorder.client.get_run(done)
    tracker = {k: v for k, v in run.data.tags.items() if k == "tracker"}
    line = RunResult(config={}, metrics=dict(run.data.metrics), tags=tracker, status=run.info.status, run_id=done)
    print(
        f"sweep: already recorded, not run again ({FORCE_KEY}=true records a repeat: "
        f"{this_command(f'{FORCE_KEY}=true')})\n{line.summary(run.info.run_name)}\n"
        f"{run_hint(recorder.tracking_uri, recorder.experiment_id, done)}",
        flush=True,
    )
    return None


def _drop_holder(recorder: Any, holder: str) -> None:
    try:
        claims.drop(recorder, holder)
    except Exception as e:  # noqa: BLE001 - at exit: one line; the next sweep marks the holder KILLED
        print(f"sweep: the single run's claim (run {holder}) not released: {e}", file=sys.stderr, flush=True)


def _say(line: str, stream: Any = None) -> None:
    """`line` on stdout (or `stream`); its reader gone (`sweep ... | head -0`), what the command says from then on
    goes to /dev/null and the command goes on: the run is recorded, or kept and said not to be with exit 1 (the
    BrokenPipeError was Hydra's warning of a failed callback, and a result not recorded then exited 0)."""
    try:
        print(line, file=stream or sys.stdout, flush=True)
    except BrokenPipeError:
        output_closed()


class MLflowCallback(Callback):
    """Listed in `hydra.callbacks`. Holds the multirun's `SweepSession`, and the launcher hooks over the same
    session, which it offers to the project's launcher; under any other launcher it records itself."""

    def __init__(self) -> None:
        self.session = SweepSession()
        self.hooks = SweepLaunchHooks(self.session)
        self.namer: Any = None  # multiruns: a job is named by what it varies (the launcher's naming)
        self.t0 = 0.0
        self.cpu0 = 0.0  # at the job's start, in the process that runs it

    def __getstate__(self) -> dict[str, Any]:
        # Hydra's context takes this callback to the jobs. Driven by the project's launcher: only the hooks'
        # flag (the session stays in the launching process); under another launcher, the session less its store.
        if self.hooks.driven:
            return {"hooks": self.hooks, "session": None, "namer": None, "t0": 0.0, "cpu0": 0.0}
        return dict(self.__dict__)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_interpolations(config)
            check_rules_of_round(config)
            check_job_dir(config, "hydra.run.dir")
            check_store(config, write=False)  # a single run keeps a result its store refuses in the spool
        except Refusal as e:
            e.exit()
        except Exception as e:  # noqa: BLE001 - Hydra warns of a callback's exception and runs the job anyway
            print(
                f"sweep: the store could not be checked, the job was not run: {type(e).__name__}: {e}", file=sys.stderr
            )
            sys.exit(1)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Hydra turns a callback's exception into a warning and runs the sweep anyway, recording nothing: an
        # unforeseen failure here stops the command instead, before any job
        try:
            self._start(config, **kwargs)
        except Exception as e:  # noqa: BLE001 - whatever it is, no job may run unrecorded
            print(
                f"sweep: the recording could not start, no job was run: {type(e).__name__}: {e}",
                file=sys.stderr,
            )
            traceback.print_exc()
            sys.exit(1)

    def _start(self, config: DictConfig, **kwargs: Any) -> None:
        try:  # a store that cannot be written is found in milliseconds, before any launcher starts a job
            check_interpolations(config)
            check_rules_of_round(config)
            check_job_dir(config, "hydra.sweep.dir")
            check_store(config, write=True)
            check_not_empty(config)
            check_slurm_here(launcher_name(config))
        except Refusal as e:
            e.exit()
        self.hooks.on_multirun_start(config, **kwargs)  # offers the hooks to the project's launcher
        if launched_by_own_launcher(config):
            return  # the project's launcher checks every job in its plan (SweepLaunchHooks.plan)
        try:  # basic and submitit_local run the jobs on this machine
            check_grid(config, runs_here="slurm" not in launcher_name(config))
        except Refusal as e:
            e.exit()
        if not config.mlflow.enabled:
            return

        self.namer = Namer.for_multirun(config.hydra)
        try:
            self.session.open(config, config, launcher_name(config), launcher_params(config))
        except store.StoreError as e:
            print(f"sweep: {e}", file=sys.stderr, flush=True)
            sys.exit(1)
        self.t0 = time.perf_counter()
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
        parent = self.session.parent
        name, num = config.get("run_name"), OmegaConf.select(config, "hydra.job.num", default=None)
        if parent is not None and name is None and self.namer is not None:
            name = self.namer.names([list(config.hydra.overrides.task)], [num])[0]
        if job_return.status == JobStatus.COMPLETED:
            result = job_return.return_value
            if result is None and parent is not None and is_sweep_job(config):  # skipped: already done
                self.session.mark(config, SKIPPED_TAG, num, "true")
        elif isinstance(job_return._return_value, ConfigError):  # bad input: no run; the parent lists the job
            self.session.mark(config, REFUSED_TAG, num, f"{name}: config error: {job_return._return_value}")
        else:
            job_cfg = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])
            result = failed_result(job_cfg, job_return._return_value)
        if isinstance(result, RunResult):
            tags = None
            if parent is not None:  # a sweep's job: tagged as the project's launcher tags it
                tags = {ROUTE_TAG: launcher_name(config), JOB_NUM_TAG: str(num)}
            if result.status == "FINISHED":
                bill_cpu(result, config, cpu_s)
            self._record(config, result, name, tags)

    def _record(
        self, config: DictConfig, result: RunResult, run_name: str | None, tags: dict[str, str] | None = None
    ) -> None:

        try:
            try:
                self.session.store(config)
            except Exception as e:  # noqa: BLE001 - the store cannot be opened: keep the result, then say so
                uri = getattr(e, "uri", None) or config.mlflow.tracking_uri or default_tracking_uri()
                cause = e.cause if isinstance(e, StoreError) else open_store(uri).explain(e)
                where = spool.keep(
                    result,
                    uri,
                    config.mlflow.experiment,
                    cause,
                    parent_run_id=self.session.parent,
                    run_name=run_name,
                    extra_tags=tags,
                )
                raise StoreError(uri, f"{cause}; {where}") from None
            self.session.write(config, result, run_name, tags)
        except StoreError as e:
            _say(result.summary(run_name))
            _say(f"sweep: result not recorded: {e}", sys.stderr)
            self.session.unrecorded += 1
            if str(OmegaConf.select(config, "hydra.mode", default="")) != str(RunMode.MULTIRUN):
                sys.exit(1)
            return
        _say(result.summary(run_name), sys.stdout if result.status == "FINISHED" else sys.stderr)
        recorder = self.session.recorder
        if tags is None and recorder is not None and result.run_id:  # a single run: where it went, how to look
            _say(recorded_line(recorder.tracking_uri, config.mlflow.experiment, recorder.experiment_id, result.run_id))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.hooks.tally is not None:  # the project's launcher drove the hooks: they close the sweep
            return self.hooks.on_multirun_end(config, **kwargs)
        self.hooks.on_multirun_end(config, **kwargs)  # withdraws the offer
        if self.session.unrecorded:
            print(
                f"sweep: {self.session.unrecorded} result(s) not recorded (each line above says where it is kept)",
                file=sys.stderr,
                flush=True,
            )
        parent = self.session.parent
        try:
            # MLflow logs a store's error with a traceback before raising it: the one line below says it
            logging.getLogger("mlflow.store.db.utils").disabled = True
            self._close(config)  # the summary; exit 1 when a job failed
        except Exception as e:  # noqa: BLE001 - the store failed at the end (a full disk): one line, exit 1
            uri = config.mlflow.tracking_uri or default_tracking_uri()
            why = str(e) if isinstance(e, StoreError) else f"store {uri}: {open_store(uri).explain(e)}"
            print(
                f"sweep: parent run {parent} not closed: {why}",
                file=sys.stderr,
                flush=True,
            )
            sys.exit(1)
        finally:
            logging.getLogger("mlflow.store.db.utils").disabled = False
        if self.session.unrecorded:
            sys.exit(1)

    def _close(self, config: DictConfig) -> None:
        """In the launching process, once: the parent's totals from the child runs the store holds (under
        submitit the jobs' processes wrote them), its status, the summary line and where to look next
        (`sweep_ended`, as under the project's launcher)."""
        session = self.session
        if session.parent is None or os.getpid() != session.launching_pid:
            return
        atexit.unregister(self._close_at_exit)
        try:
            session.store(config)
            parent, runs = session.stored_children()
        except Exception:  # noqa: BLE001 - the store failed mid-sweep: its line is printed already
            if not session.unrecorded:
                raise
            return
        session.results = [RunResult(config={}, metrics=dict(r.data.metrics), status=r.info.status) for r in runs]
        tally = Tally(t0=self.t0, launcher={"name": launcher_name(config)}, force_key=FORCE_KEY)
        tally.done = sum(r.info.status == "FINISHED" for r in runs)
        tally.killed = sum(r.info.status == "KILLED" for r in runs)
        tally.skipped = sum(k.startswith(SKIPPED_TAG) for k in parent.data.tags)
        tally.failures = [
            (r.info.run_name, f"{r.info.status}: traceback.txt in run {r.info.run_id}")
            for r in runs
            if r.info.status == "FAILED"
        ]
        tally.failures += [
            tuple(v.split(": ", 1)) for k, v in sorted(parent.data.tags.items()) if k.startswith(REFUSED_TAG)
        ]
        self.hooks.sweep_ended("FAILED" if tally.failures or session.unrecorded else "FINISHED", tally)

    def _close_at_exit(self, config: DictConfig) -> None:
        try:
            self._close(config)
        except SystemExit:
            pass  # failures: Hydra's sweeper raised the first one and the command exits 1 already
        except Exception as e:  # noqa: BLE001 - at exit: one line, not a traceback
            print(f"sweep: parent run {self.session.parent} not closed: {e}", file=sys.stderr, flush=True)


def launcher_name(config: DictConfig) -> str:
    """The Hydra launcher a multirun runs on (its config-group choice: basic, submitit_local, submitit_slurm)."""
    return str(OmegaConf.select(config, "hydra.runtime.choices", default={}).get("hydra/launcher", "basic"))


def launcher_params(config: DictConfig) -> dict[str, Any]:
    """The launcher's own settings (submitit: timeout_min, partition, ...) as the parent's params."""
    node = OmegaConf.to_container(config.hydra.launcher, resolve=True)
    return {
        f"launcher.{k}": v
        for k, v in node.items()
        if k != "_target_" and v is not None and not isinstance(v, (dict, list))
    }
