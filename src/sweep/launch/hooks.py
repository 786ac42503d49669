"""The project's launcher's seam (`LaunchHooks`), held by the Hydra callback and driven by the launcher.

Under the project's launcher (`hydra/launcher=sweep|local|modal`) these run in the launching process: where a
job runs (its device), every job checked before any starts (`sweep.preflight`, exit 2), the MLflow parent run, resume
(jobs with a FINISHED run are skipped), each job's child run with its cost as it arrives, and at the end the
parent's totals, the summary and the exit code. The recording itself is the session's (`record.session`).
"""

from __future__ import annotations

import copy
import resource
import sys
import time
from collections import Counter
from dataclasses import replace
from functools import partial
from typing import Any, Callable, Iterator, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from hydra_plugins.sweep_launcher.api import (
    JobPlan,
    LaunchHooks,
    Outcome,
    PlannedJob,
    Refused,
    Tally,
    batch_size,
    time_limit,
)
from sweep.batch.key import batch_key
from sweep.config.memory import available_bytes
from sweep.config.placement import placement
from sweep.config.prices import device_price_per_hour, gpu_price_per_hour
from sweep.config.schema import JOB_GROUPS
from sweep.job import job_config
from sweep.launch.estimate import expectation
from sweep.preflight.interpolations import check_interpolations
from sweep.preflight.jobs import basic_sweeper, check_planned, resolves, twice
from sweep.preflight.placement import instead_of_modal
from sweep.preflight.refusal import Refusal
from sweep.record import writes
from sweep.record.background import signals_held
from sweep.record.recorder import Recorder, config_hash
from sweep.record.session import FORCE_KEY, SweepSession, bill, failed_result, is_sweep_job
from sweep.record.store import StoreError
from sweep.record.tags import (
    DONE_RUNS_PER_TAG,
    DONE_RUNS_TAG,
    JOB_NUM_TAG,
    MODAL_GPU_TAG,
    MODAL_OFFLINE_TAG,
    ROUTE_TAG,
    TIME_LIMIT_TAG,
)
from sweep.report.ui import next_steps
from sweep.result import RunResult

# the launcher's settings the parent run records
PARENT_PARAMS = ("route", "n_workers", "batch", "modal.offline", "time_limit_s")
BATCH_SETTING = "batch"  # the app's own batch size (sweep.config.schema.Config.batch)
TIME_LIMIT_SETTING = "time_limit_s"  # the app's own time limit a run (sweep.config.schema.Config.time_limit_s)
HASH_KEY = "config_hash"  # job.data: the job's resolved config's hash (a sweep job, checked)
RECORD_KEY = "record"  # job.data: (run_name, device price per hour) that job_ended records a finished job with


def named(cfg: DictConfig) -> Optional[str]:
    """The job's `run_name`, resolved as the job resolves it: `${hydra:job.override_dirname}` (Hydra's idiom for a
    run's name) reads the job's own Hydra config, which the plan has not set (it was a 116-line traceback)."""
    from hydra.core.hydra_config import HydraConfig  # noqa: PLC0415 - Hydra's own, only for a ${hydra:...} name
    from omegaconf.errors import InterpolationResolutionError  # noqa: PLC0415

    try:
        return OmegaConf.select(cfg, "run_name", default=None)
    except InterpolationResolutionError:
        if OmegaConf.select(cfg, "hydra", default=None) is None:
            raise
    held, own = HydraConfig.instance().cfg, copy.deepcopy(cfg)  # (set_config makes its hydra node read-only)
    try:
        HydraConfig.instance().set_config(own)
        return OmegaConf.select(own, "run_name", default=None)
    finally:
        HydraConfig.instance().cfg = held


class SweepLaunchHooks(LaunchHooks):
    """The app's side of the launcher seam: a thin adapter over the multirun's `SweepSession`."""

    # array_api_compat.numpy: the numpy backend's namespace, ~0.13 s to import
    preload = ("sweep.job", "array_api_compat.numpy")

    def __init__(self, session: SweepSession) -> None:
        self.session = session
        self.multirun_config: Any = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.multirun_config = config  # the sweep's own overrides (a job's config holds only its own)
        super().on_multirun_start(config, **kwargs)

    def title(self, cfg: DictConfig) -> Optional[str]:
        """The study: the MLflow experiment its runs go to (a preset names it after itself)."""
        return str(OmegaConf.select(cfg, "mlflow.experiment", default="")) or None

    def plan(self, jobs: Iterator[PlannedJob]) -> Iterator[tuple[int, JobPlan]]:
        """Every job checked before any starts (a bad one: Refused, exit 2), one at a time, and planned: where it
        runs (`sweep.config.placement`), its batch key and time limit; only its config's hash is kept. Then the
        parent run opened, and the jobs to skip planned again: those already done, and those another sweep running
        now has claimed (`sweep.record.claims`: why)."""
        first: Optional[DictConfig] = None  # the sweep's settings (store, prices, batch): every job shares them
        launcher = self.tally.launcher if self.tally is not None else {}
        offline = bool(launcher.get("modal.offline"))
        batch = 1
        hashes: dict[int, str] = {}
        names: dict[int, str] = {}
        methods: dict[int, str] = {}  # each job's method.name: the estimate's last resort
        plans: dict[int, JobPlan] = {}
        room = available_bytes()  # what memory is left: once for the whole check pass, not once a job
        available = lambda: room  # noqa: E731
        prices: Optional[str] = None
        alike: Counter = Counter()  # (where, gpu, batch key) -> how many jobs share it
        first_of: dict[tuple, tuple[str, dict, dict]] = {}  # ... -> its first job (label, config, placed): its batch
        labels: dict[str, str] = {}  # config hash -> the first job with it
        grid: Optional[bool] = None  # Hydra's basic sweeper's grid (a search may draw a config twice)
        for job in jobs:
            if any("${" in o for o in job.overrides):  # a swept interpolation: the sweep's start saw none of it
                refused(check_interpolations, job.cfg, job.label())
            config = refused(resolves, partial(planned_config, job), job.label())
            if config is None:  # other apps' jobs (Hydra's test apps) just run
                continue
            if first is None:
                first = copy.deepcopy(job.cfg)  # the stream's configs last one turn each
                prices = self._prices(first)
                own = setting(job, BATCH_SETTING)
                batch = launcher.get("batch") or (batch_size(own, BATCH_SETTING) if own is not None else 1)
            limit = launcher.get("time_limit_s")  # a run's, where the launcher kills one past it
            if limit is None:
                limit = time_limit(setting(job, TIME_LIMIT_SETTING), TIME_LIMIT_SETTING)
            where, gpu = job.place(*placement(config))
            placed = {
                "where": where,
                "gpu": gpu,
                "prices": prices,
                "runs_here": where == "local" or offline,  # a local worker or Modal offline: its device must be here
                "time_limit_s": limit,
            }
            refused(check_planned, config, job.label(), **placed, available=available)
            hashes[job.idx] = job.data[HASH_KEY] = config_hash(config)  # resume and job_ended read it
            if grid is None:
                grid = basic_sweeper(job.cfg)
            twin = labels.setdefault(hashes[job.idx], job.label())
            if grid and twin != job.label():
                refused(twice, twin, job.label())
            job.data[RECORD_KEY] = (
                named(job.cfg),
                device_price_per_hour(config["device"]),
            )
            names[job.idx] = job.data[RECORD_KEY][0] or job.name  # as job_ended names its run: the estimate's key
            methods[job.idx] = str((config.get("method") or {}).get("name") or "")
            key = batch_key(config) if batch > 1 else None
            if key is not None:
                alike[(where, gpu, key)] += 1
                first_of.setdefault((where, gpu, key), (job.label(), config, placed))
            instead = partial(instead_of_modal, config["device"]) if where == "modal" else None
            plans[job.idx] = JobPlan(where, gpu, batch_key=key, batch=batch, time_limit_s=limit, instead=instead)
            yield job.idx, plans[job.idx]
        check_batches(alike, first_of, batch, available)
        if first is None or not bool(OmegaConf.select(first, "mlflow.enabled", default=False)):
            return
        # the launcher's settings, the batch and time limit the plans hold where the launcher has none
        params = {**launcher, "batch": batch, "time_limit_s": plans[min(plans)].time_limit_s}
        try:  # a store MLflow cannot open: one line, exit 1, before any job (not Hydra's error report)
            self.session.open(
                first,
                self.multirun_config,
                str(launcher.get("name", "?")),
                {f"launcher.{k}": v for k, v in params.items() if k in PARENT_PARAMS and v is not None},
                fast=True,
            )
            # either switch re-runs done jobs: the app's (any launcher) or the launcher's own
            force = launcher.get("force") or OmegaConf.select(first, FORCE_KEY, default=False)
            done = {} if force else self.session.done_hashes(first, set(hashes.values()))
            held = self.session.claim(first, set(hashes.values()) - set(done))
            self._note_done(first, sorted({done[h] for h in hashes.values() if h in done}))
        except StoreError as e:  # the parent, where it was opened, closed FAILED: not left RUNNING
            self._close_refused()
            raise Refused(f"sweep: {e}", code=1) from None
        expected = self._expected()
        for idx, h in hashes.items():
            if h in done:
                yield idx, replace(plans[idx], done=True)
            elif h in held:
                yield idx, replace(plans[idx], skip=running_elsewhere(held[h]))
            elif expected is not None:
                yield idx, replace(plans[idx], expected_s=expected(h, names[idx], methods[idx]))

    def _expected(self) -> Optional[Callable[[str, str, str], Optional[float]]]:
        """The seconds a job is expected to take, from the experiment's earlier runs (`Recorder.earlier_seconds`;
        a tracking server is asked nothing more for them): (config hash, run name) -> its own earlier run's (the
        same config, else the same name, else the same name but its seed: another seed of the arm), else their
        median; None where there is none. Without the arm, a fresh seed of a slow arm was expected to take the
        median (`sweeps=parity_challenge problem.seed=1,2,3`: 11 s expected, 3 min taken)."""
        recorder = self.session.recorder
        try:
            took = recorder.earlier_seconds() if recorder is not None and self.session.parent else []
        except Exception:  # noqa: BLE001 - an estimate is a nicety: a store that cannot say gives none
            return None
        return expectation(took) if took else None

    def _note_done(self, config: DictConfig, run_ids: list[str]) -> None:
        """The runs of the jobs skipped as done, on the parent (DONE_RUNS_TAG): the sweep's runs that it has no
        child for, so that its report shows the whole sweep. StoreError (one line) where the store refuses."""
        recorder = self.session.store(config)
        try:
            chunks = {
                f"{DONE_RUNS_TAG}{i // DONE_RUNS_PER_TAG}": ",".join(run_ids[i : i + DONE_RUNS_PER_TAG])
                for i in range(0, len(run_ids), DONE_RUNS_PER_TAG)
            }
            writes.tag_runs(recorder.store_client, {self.session.parent: chunks})
        except Exception as e:  # noqa: BLE001 - whatever the store raised: one line, before any job
            raise StoreError(recorder.tracking_uri, f"the skipped jobs' runs could not be noted: {e}") from e

    def run_batch(self, cfgs: Sequence[DictConfig]) -> list[Any]:
        from sweep.batch.run import run_batch  # noqa: PLC0415 - the job's modules: in the worker, when a batch runs

        return run_batch(cfgs)

    @staticmethod
    def _prices(cfg: DictConfig) -> Optional[str]:
        return OmegaConf.select(cfg, "hydra.launcher.modal.prices", default=None)

    def job_ended(self, job: PlannedJob, outcome: Outcome) -> Optional[str]:
        """Write the job's child run, with what it cost; a finished run's line is its summary."""
        self._record(job, outcome)
        value = outcome.value if outcome.status == "FINISHED" else None
        return value.summary(job.label()) if isinstance(value, RunResult) else None

    def _record(self, job: PlannedJob, outcome: Outcome) -> None:
        if self.session.parent is None or HASH_KEY not in job.data:
            return
        if outcome.status == "FINISHED":
            result = outcome.value
            if not isinstance(result, RunResult):
                return
        else:  # FAILED, or KILLED for a job cut short by a signal
            result = failed_result(job.cfg, None, status=outcome.status, error=outcome.error or "unknown failure")
        tags = {ROUTE_TAG: job.where, JOB_NUM_TAG: str(job.idx)}
        if outcome.time_limit_s is not None:  # killed by the launcher for its time: the reports say so, not "error"
            tags[TIME_LIMIT_TAG] = f"{outcome.time_limit_s:g}"
        run_name, price = job.data[RECORD_KEY]  # noted at plan: a finished local job needs no job.cfg here
        if job.where == "modal":
            # Modal bills the container's seconds at the GPU's rate (the job's own seconds: a lower bound,
            # container start-up is billed too)
            bill(result, "billed_s", outcome.wall_s, gpu_price_per_hour(job.gpu, self._prices(job.cfg)))
            tags[MODAL_GPU_TAG] = str(job.gpu or "cpu")
            tags[MODAL_OFFLINE_TAG] = str(outcome.offline).lower()
        elif result.status == "FINISHED":
            bill(result, "cpu_s", outcome.cpu_s, price)
        # the session's store is open (plan opened it): the sweep's config names it
        try:
            self.session.write(self.multirun_config, result, run_name or job.name or None, tags)
        except Exception:
            self._close_refused()  # the launcher stops the sweep at a refused result, with no sweep_ended
            raise
        result.recorded()

    def _close_refused(self) -> None:
        """The parent closed FAILED as the sweep stops at a result its store refused, not left RUNNING for the next
        sweep to call its launcher killed; a full disk refuses that too: its end is kept in the spool, said here."""
        parent, session = self.session.parent, self.session
        try:
            session.close("FAILED")
        except Exception as e:  # noqa: BLE001 - the store refused it too (StoreError: where its end is kept)
            print(f"sweep: parent run {parent} not closed: {e}", file=sys.stderr, flush=True)
        session.parent = None

    def sweep_ended(self, status: str, tally: Tally, note: str = "") -> None:
        """Close the parent run with the sweep's totals, then the summary and exit code (LaunchHooks')."""
        session = self.session
        with signals_held():  # the runs still being written, then the parent: a signal waits until they are
            refused = session.flush()
            if refused and status == "FINISHED":  # runs the store refused (kept in the spool): the sweep FAILED
                status = "FAILED"
            # CPU seconds of this process and of its (joined) workers: where a sweep's time goes
            own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            unclosed = self._closed(
                status,
                {
                    "sweep_wall_s": time.perf_counter() - tally.t0,
                    "launcher_cpu_s": own.ru_utime + own.ru_stime,
                    "workers_cpu_s": workers.ru_utime + workers.ru_stime,
                    "jobs_skipped": float(tally.skipped),
                    "jobs_claimed_elsewhere": float(sum(tally.skipped_for.values())),
                    "jobs_killed": float(tally.killed),
                    "jobs_left_out": float(tally.left_out),
                },
            )
        parent, session.parent = session.parent, None
        if unclosed:  # its end is kept in the spool (said above): the sweep failed
            status, note = "FAILED", note or f"; parent run {parent} not closed"
        note = note or (f"; parent run {parent} is {status}" if parent else "")
        if refused:
            note += f"; {refused} result(s) not recorded (each line above says where it is kept)"
        try:
            super().sweep_ended(status, tally, note)
        finally:  # the last line, after the failures: where to look next
            if session.recorder is not None and parent is not None:
                _next_steps(session.recorder, parent)
        if (refused or unclosed) and status != "KILLED":
            raise SystemExit(1)

    def _closed(self, status: str, extra: dict[str, float]) -> bool:
        """Close the parent; False where the store refused (one line: where its end is kept). It raised out of
        Hydra's callback, which made it a warning: a tracking server killed at a sweep's end left exit 0."""
        try:
            self.session.close(status, extra)
        except Exception as e:  # noqa: BLE001 - StoreError: the end kept in the spool, where is in its line
            print(f"sweep: parent run {self.session.parent} not closed: {e}", file=sys.stderr, flush=True)
            return True
        return False


def running_elsewhere(parent_run_id: str) -> str:
    """Why a job claimed by another sweep is skipped (said once per sweep that holds claims)."""
    return f"another sweep is running them (parent run {parent_run_id}; a later sweep runs what it leaves)"


def planned_config(job: PlannedJob) -> Optional[dict[str, Any]]:
    """The job's resolved config (`sweep.job.job_config`), from the launcher's plain data where it made it
    (`PlannedJob.resolved`: once per template, not once per job); None: not a sweep job."""
    assert job.cfg is not None
    plain = job.resolved
    if plain is None or not all(k in plain for k in JOB_GROUPS):
        return job_config(job.cfg) if is_sweep_job(job.cfg) else None
    if "extra" not in plain and "extra" in job.cfg:  # left out (it reads the job's values): resolved here
        plain = {**plain, "extra": job.cfg.extra}
    return job_config(plain)


def setting(job: PlannedJob, key: str) -> Any:
    """A top-level setting of a job's config (the app's own batch, time limit): from the launcher's plain data
    where it made it."""
    if job.resolved is not None and key in job.resolved:
        return job.resolved[key]
    return OmegaConf.select(job.cfg, key, default=None)


def check_batches(
    alike: Counter,
    first_of: dict[tuple, tuple[str, dict, dict]],
    batch: int,
    available: Callable[[], Optional[float]] = available_bytes,
) -> None:
    """The size guard counts a batch as its runs: `batch`, or fewer where fewer jobs share its key. The jobs of one
    key differ only in what their method vectorises, so the first one's config (label, config, placement) sizes them
    all."""
    for k, n in alike.items():
        if min(batch, n) > 1:
            label, config, placed = first_of[k]
            refused(check_planned, config, label, **placed, runs=min(batch, n), available=available)


def refused(check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A preflight check (sweep.preflight) in the launcher's plan: its refusal as the launcher's `Refused`; else
    what it returns."""
    try:
        return check(*args, **kwargs)
    except Refusal as e:
        raise Refused(f"sweep: {e.line}", code=e.code) from None


def _next_steps(recorder: Recorder, parent: str) -> None:
    """The sweep's last line, where its store answers. Not asked of a server that stopped answering this command,
    and a store that refuses it is one line: its error, raised from here, took the place of the sweep's exit 1
    (Hydra made it a warning: a paused tracking server's sweep, its 6 results in the spool, exited 0)."""
    if recorder.answering.lost is not None:
        return
    try:
        print(next_steps(recorder.store_client, recorder.tracking_uri, recorder.experiment_id, parent), flush=True)
    except Exception as e:  # noqa: BLE001 - the runs and the parent are said above: this line alone is lost
        why = recorder.answering.cause(e, recorder.store.explain)
        print(f"sweep: no next steps: {StoreError(recorder.tracking_uri, why)}", file=sys.stderr, flush=True)
