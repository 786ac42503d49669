"""What the sweep app does around the launcher's jobs, through the launcher's one seam (`LaunchHooks`).

Under the project's launcher (`hydra/launcher=sweep|local|modal`) these run in the launching process: where a
job runs (its device), every job checked before any starts (exit 2), the MLflow parent run, resume (jobs with
a FINISHED run are skipped), each job's child run with its cost as it arrives, and at the end the parent's
totals, the summary and the exit code. `recording.MLflowCallback` adds the same recording for Hydra's own
launchers and single runs; only the launching process ever writes the store.
"""
from __future__ import annotations

import gc
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra_plugins.sweep_launcher.hooks import LaunchHooks, Outcome, PlannedJob, Refused, Tally
from omegaconf import DictConfig, OmegaConf

from sweep.result import RunResult
from sweep.validate import JOB_GROUPS

# re-run jobs that already have a FINISHED run, under any launcher (the project's also has hydra.launcher.force)
FORCE_KEY = "mlflow.force"

RESUME_QUERY_MAX = 16  # up to this many jobs, one query each; more: one pass over the experiment's runs


def placement(cfg: DictConfig) -> tuple[str, Optional[str]]:
    """(local | modal, Modal gpu or None): numpy or torch on cpu -> local, torch on cuda -> Modal unless
    device.local_gpu."""
    device = OmegaConf.select(cfg, "device")
    if not isinstance(device, DictConfig):
        return "local", None
    cuda = device.get("backend") == "torch" and str(device.get("torch_device", "cpu")).startswith("cuda")
    gpu = device.get("gpu")
    return ("modal" if cuda and not device.get("local_gpu", False) else "local"), (str(gpu) if gpu else None)


def failed_result(job_cfg: DictConfig, exc: BaseException | None, status: str = "FAILED",
                  error: str | None = None) -> RunResult:
    """The record of a job that raised: its config, tags, and the traceback (logged as an artifact).

    `error`: the traceback as text, for a job that raised in another process (the exception's traceback
    does not travel with it)."""
    from sweep.job import job_config

    tb = error if error is not None else "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    tags = {g: str(OmegaConf.select(job_cfg, f"{g}.name", default="?")) for g in JOB_GROUPS}
    return RunResult(config=job_config(job_cfg), tags=tags, status=status, error=tb)


def charge_cpu(result: RunResult, cfg: DictConfig, cpu_s: float) -> None:
    """A job that ran on a CPU host (not a Modal GPU): its task's CPU seconds, and their cost at
    device.price_per_hour (whichever launcher ran it)."""
    from sweep.cost import cost_usd, device_price_per_hour

    price = device_price_per_hour(cfg.device) if OmegaConf.select(cfg, "device") is not None else 0.0
    result.metrics["cpu_s"] = cpu_s
    result.metrics["cost_usd"] = cost_usd(cpu_s, price)


def repair_abandoned(recorder: Any) -> None:
    """Before a sweep opens its parent: runs a killed launcher left RUNNING become KILLED, said in one line."""
    from sweep.recorder import KILLED_REASON_TAG

    repaired = recorder.repair_abandoned()
    if repaired:
        print(f"sweep: {len(repaired)} run(s) left RUNNING by a launcher that was killed are now KILLED "
              f"(tag {KILLED_REASON_TAG})", file=sys.stderr, flush=True)


def open_parent(recorder: Any, multirun_cfg: DictConfig, launcher: str, params: dict[str, Any]) -> str:
    """The sweep's parent run, whichever launcher runs its jobs (runs a killed launcher left RUNNING are marked
    KILLED first, before resume reads the store): named and tagged by the command line's overrides (compare
    finds a resumed sweep's earlier parents by them), with the launcher's name, the sweep's directory and the
    launcher's settings (`params`)."""
    repair_abandoned(recorder)
    overrides = " ".join(OmegaConf.to_container(multirun_cfg.hydra.overrides.task))
    return recorder.start_parent(
        f"sweep {overrides}".strip(),
        {"sweep.overrides": overrides, "launcher": launcher,
         "sweep.dir": str(Path(str(multirun_cfg.hydra.sweep.dir)).resolve())},
        params=params)


def is_sweep_job(cfg: DictConfig) -> bool:
    return all(k in cfg for k in JOB_GROUPS)


def _sqlite_wal() -> None:
    """SQLite stores written by this process use WAL with synchronous=NORMAL: a commit no longer waits for an
    fsync (MLflow commits ~9 times per run, ~6 ms each on a slow disk), and the store still survives a crash
    of the process; only the last transactions could be lost to a power cut. Readers are unaffected."""
    if getattr(_sqlite_wal, "on", False):
        return
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

    event.listen(Engine, "connect", on_connect)
    _sqlite_wal.on = True  # type: ignore[attr-defined]


class SweepLaunchHooks(LaunchHooks):
    """The app's side of the launcher seam. Shares `recorder`, `parent` and `results` with
    `recording.MLflowCallback`, which subclasses it (one object per multirun, one parent run)."""

    recorder: Any = None
    parent: Optional[str] = None
    multirun_config: Any = None
    # array_api_compat.numpy: the numpy backend's namespace, ~0.13 s to import
    preload = ("sweep.job", "array_api_compat.numpy")

    def _recorder(self, config: DictConfig) -> Any:  # MLflowCallback's
        raise NotImplementedError

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.multirun_config = config  # the sweep's own overrides (a job's config holds only its own)
        super().on_multirun_start(config, **kwargs)

    def placement(self, cfg: DictConfig) -> tuple[str, Optional[str]]:
        return placement(cfg)

    def title(self, cfg: DictConfig) -> Optional[str]:
        """The study: the MLflow experiment its runs go to (a preset names it after itself)."""
        return str(OmegaConf.select(cfg, "mlflow.experiment", default="")) or None

    def job_line(self, job: PlannedJob, outcome: Outcome) -> Optional[str]:
        value = outcome.job_return.return_value
        return value.summary(job.label()) if isinstance(value, RunResult) else None

    def plan(self, jobs: Sequence[PlannedJob]) -> set[int]:
        from sweep.cost import gpu_price_per_hour
        from sweep.job import job_config
        from sweep.validate import ConfigError, validate

        mine = [j for j in jobs if is_sweep_job(j.cfg)]  # other apps' jobs (Hydra's test apps) just run
        prices = self._prices(jobs[0].cfg) if jobs else None
        offline = bool(self.tally is not None and self.tally.launcher.get("modal.offline"))
        for job in mine:
            job.data["config"] = job_config(job.cfg)  # resolved once: the rules, resume and params read it
            try:  # a local worker or Modal offline runs the job on this machine: its device must be here
                validate(job.data["config"], runs_here=job.where == "local" or offline)
                if job.where == "modal":  # a Modal job needs a price for its GPU type before it runs
                    try:
                        gpu_price_per_hour(job.gpu, prices)
                    except KeyError as e:
                        raise ConfigError(f"device.gpu: {e.args[0]}") from None
            except ConfigError as e:
                raise Refused(f"sweep: config error in job {job.label()}: {e}") from None
        if not mine or not bool(OmegaConf.select(mine[0].cfg, "mlflow.enabled", default=False)):
            return set()
        self._start(mine[0].cfg)
        # either switch re-runs done jobs: the app's (any launcher) or the launcher's own
        if (self.tally is not None and self.tally.launcher.get("force")) or OmegaConf.select(
                mine[0].cfg, FORCE_KEY, default=False):
            return set()
        done = self._finished_hashes([j.data["config"] for j in mine])
        from sweep.recorder import config_hash

        return {j.idx for j in mine if config_hash(j.data["config"]) in done}

    @staticmethod
    def _prices(cfg: DictConfig) -> Optional[str]:
        return OmegaConf.select(cfg, "hydra.launcher.modal.prices", default=None)

    def _start(self, cfg: DictConfig) -> None:
        """Open the store and the sweep's parent run (once per multirun, after every job of the first batch
        passed its checks); runs a killed launcher left RUNNING are marked KILLED first."""
        if self.parent is not None:
            return
        _sqlite_wal()
        recorder = self._recorder(cfg)
        gc.freeze()  # MLflow, Hydra and the composed configs stay: per-job collections need not rescan them
        launcher = self.tally.launcher if self.tally is not None else {}
        self.parent = open_parent(
            recorder, self.multirun_config, str(launcher.get("name", "?")),
            {f"launcher.{k}": v for k, v in launcher.items() if k in ("route", "n_workers", "modal.offline")})

    def _finished_hashes(self, configs: list[dict[str, Any]]) -> set[str]:
        """Config hashes among `configs` that already have a FINISHED run (resume)."""
        from sweep.recorder import HASH_TAG, config_hash

        rec = self.recorder
        wanted = {config_hash(c) for c in configs}
        if len(wanted) <= RESUME_QUERY_MAX:  # a query per job is cheapest for a few jobs
            return {config_hash(c) for c in configs if rec.finished_run(c)}
        found: set[str] = set()  # MLflow's search has no IN for tags: one pass over the finished runs
        token = None
        while True:
            page = rec.client.search_runs([rec.experiment_id], filter_string="attributes.status = 'FINISHED'",
                                          max_results=5000, page_token=token)
            found |= {r.data.tags.get(HASH_TAG) for r in page} & wanted
            token = page.token
            if not token:
                return found

    def job_ended(self, job: PlannedJob, outcome: Outcome) -> None:
        """Write the job's child run, with what it cost (the only writer of the store)."""
        from sweep.cost import cost_usd, gpu_price_per_hour

        if self.parent is None or "config" not in job.data:
            return
        if outcome.status == "FINISHED":
            result = outcome.value
            if not isinstance(result, RunResult):
                return
        else:  # FAILED, or KILLED for a job cut short by a signal
            result = failed_result(job.cfg, None, status=outcome.status, error=outcome.error or "unknown failure")
        tags = {"sweep.route": job.where, "hydra.job.num": str(job.idx)}
        if job.where == "modal":
            # Modal bills the container's seconds at the GPU's rate (the job's own seconds: a lower bound,
            # container start-up is billed too)
            result.metrics["billed_s"] = outcome.wall_s
            result.metrics["cost_usd"] = cost_usd(outcome.wall_s, gpu_price_per_hour(job.gpu, self._prices(job.cfg)))
            tags["modal.gpu"] = str(job.gpu or "cpu")
            tags["modal.offline"] = str(outcome.offline).lower()
        elif result.status == "FINISHED":
            charge_cpu(result, job.cfg, outcome.cpu_s)
        run_name = OmegaConf.select(job.cfg, "run_name", default=None) or job.name or None
        self.recorder.log(result, parent_run_id=self.parent, run_name=run_name, extra_tags=tags)
        self.results.append(result)  # type: ignore[attr-defined]

    def sweep_ended(self, status: str, tally: Tally) -> None:
        """Close the parent run with the sweep's totals, then the summary and exit code (LaunchHooks')."""
        if self.recorder is not None and self.parent is not None:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            # CPU seconds of this process and of its (joined) workers: where a sweep's time goes
            own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            self.recorder.client.log_batch(self.parent, metrics=[
                Metric("sweep_wall_s", time.perf_counter() - tally.t0, now, 0),
                Metric("launcher_cpu_s", own.ru_utime + own.ru_stime, now, 0),
                Metric("workers_cpu_s", workers.ru_utime + workers.ru_stime, now, 0),
                Metric("jobs_skipped", float(tally.skipped), now, 0),
                Metric("jobs_killed", float(tally.killed), now, 0)])
            self.recorder.end_parent(self.parent, status, self.results)  # type: ignore[attr-defined]
        note = f"; parent run {self.parent} is {status}" if self.parent else ""
        parent, self.parent = self.parent, None
        try:
            super().sweep_ended(status, tally, note)
        finally:  # the last line, after the failures: where to look next
            if self.recorder is not None and parent is not None:
                from sweep.ui import next_steps

                r = self.recorder
                print(next_steps(r.client, r.tracking_uri, r.experiment_id, parent), flush=True)
