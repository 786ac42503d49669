"""The launching process: compose and validate every job, route it, run it, record it.

One `SweepRun` lives for a whole multirun (all of the sweeper's batches). It owns the local worker pool, the
MLflow recorder and the parent run. Only this process writes MLflow: workers and Modal containers send back
a `_core.Reply`, and the run is written here when it arrives.

Failure isolation: Hydra's basic sweeper reads every `return_value` after a batch and re-raises the first
failure, which would skip the later batches. Failed jobs therefore come back as `IsolatedFailure`, a FAILED
JobReturn whose `return_value` does not raise; at the end of the multirun (a callback this launcher adds to
Hydra's own list) the parent run is closed, the failures are printed and the process exits 1.
"""
from __future__ import annotations

import atexit
import gc
import itertools
import logging
import multiprocessing as mp
import os
import pickle
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Optional, Sequence

import cloudpickle
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, setup_globals
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from hydra_plugins.sweep_launcher._core import Reply, Session, dump_config
from hydra_plugins.sweep_launcher._pool import Pool
from hydra_plugins.sweep_launcher._signals import Interrupt, Interrupted
from hydra_plugins.sweep_launcher.naming import Namer, swept_keys, sweep_overrides

log = logging.getLogger(__name__)
JOB_KEYS = ("problem", "method", "variant", "device", "tracker")  # = sweep.job.JOB_KEYS (no heavy import)
_session_ids = itertools.count(1)
PER_WORKER = 2  # jobs in flight per local worker


@dataclass
class Job:
    idx: int
    overrides: list[str]
    cfg: DictConfig  # composed, hydra section included
    where: str  # local | modal
    gpu: Optional[str] = None
    template: Optional[int] = None  # the FastComposer template the job was made from (None: Hydra's path)
    config: Optional[dict[str, Any]] = None  # resolved job config (sweep structure only): resume + params
    started: Optional[float] = None
    name: str = ""  # what the job varies within the sweep (naming.py): console lines, run name, failures

    def label(self) -> str:
        return self.name or f"#{self.idx} " + (" ".join(self.overrides) or "(no overrides)")


def route_of(cfg: DictConfig, route: str) -> str:
    """Where a job runs: `local`/`modal` launchers send everything to one place; `device` reads the job's
    device config: numpy or torch on cpu -> local, torch on cuda -> modal unless device.local_gpu."""
    if route in ("local", "modal"):
        return route
    device = OmegaConf.select(cfg, "device")
    if not isinstance(device, DictConfig):
        return "local"
    cuda = device.get("backend") == "torch" and str(device.get("torch_device", "cpu")).startswith("cuda")
    return "modal" if cuda and not device.get("local_gpu", False) else "local"


_wal_on = False


def _sqlite_wal() -> None:
    """SQLite stores written by this process use WAL with synchronous=NORMAL: a commit no longer waits for an
    fsync (MLflow commits ~9 times per run, ~6 ms each on this disk), and the store still survives a crash of
    the process (WAL); only the last transactions could be lost to a power cut. Readers (mlflow ui) are
    unaffected."""
    global _wal_on
    if _wal_on:
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
    _wal_on = True


# -- one multirun --------------------------------------------------------------------------------------------
class _FinishCallback(Callback):
    """Added to Hydra's callbacks: closes the sweep after the sweeper's last batch (on_multirun_end)."""

    def __init__(self, run: "SweepRun") -> None:
        self.run: Optional[SweepRun] = run

    def __getstate__(self) -> dict[str, Any]:  # shipped to workers inside the HydraContext: travel empty
        return {"run": None}

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.run is not None:
            self.run.finish(exit_on_failure=True)


class SweepRun:
    def __init__(self, launcher: Any) -> None:
        self.launcher = launcher
        cfg: DictConfig = launcher.config
        self.t0 = time.perf_counter()
        mlflow_cfg = OmegaConf.select(cfg, "mlflow")
        # Record only for the project's job structure; other apps (Hydra's test apps) just run.
        self.recording = (isinstance(mlflow_cfg, DictConfig) and bool(mlflow_cfg.get("enabled", False))
                          and all(k in cfg for k in JOB_KEYS))
        self.recorder: Any = None
        self.parent: Optional[str] = None
        self.results: list[Any] = []  # RunResults recorded
        self.failures: list[tuple[Job, str]] = []
        self.n_done = self.n_skipped = self.n_killed = 0
        self.pool: Optional[Pool] = None
        self.finished = False
        self.namer = Namer(swept_keys(sweep_overrides(cfg.hydra)))
        self.n_workers = int(launcher.n_workers or os.cpu_count() or 1)
        env_offline = os.environ.get("SWEEP_MODAL_OFFLINE", "").lower() in ("1", "true", "yes")
        self.offline = bool(launcher.modal.get("offline", False)) or env_offline
        self.launcher_name = str(OmegaConf.select(cfg, "hydra.runtime.choices.hydra/launcher",
                                                  default=launcher.route))
        callbacks = getattr(launcher.hydra_context, "callbacks", None)
        if callbacks is not None and hasattr(callbacks, "callbacks"):
            # on_multirun_end runs callbacks in reverse order: first in the list = called last
            callbacks.callbacks.insert(0, _FinishCallback(self))
        atexit.register(self.finish)  # a sweep that ends some other way still closes its parent run

    # -- recording --------------------------------------------------------------------------------------
    def start_recording(self) -> None:
        if not self.recording or self.recorder is not None:
            return
        from sweep.recorder import KILLED_REASON_TAG, Recorder

        cfg = self.launcher.config
        _sqlite_wal()
        self.recorder = Recorder(cfg.mlflow.tracking_uri, cfg.mlflow.experiment)
        gc.freeze()  # MLflow, Hydra and the composed configs stay: per-job collections need not rescan them
        repaired = self.recorder.repair_abandoned()  # before resume reads the store
        if repaired:
            print(f"sweep: {len(repaired)} run(s) left RUNNING by a launcher that was killed are now KILLED "
                  f"(tag {KILLED_REASON_TAG})", file=sys.stderr, flush=True)
        overrides = " ".join(OmegaConf.to_container(cfg.hydra.overrides.task))
        self.parent = self.recorder.start_parent(
            f"sweep {overrides}".strip(),
            {"sweep.overrides": overrides, "launcher": self.launcher_name,
             "sweep.dir": str(Path(str(cfg.hydra.sweep.dir)).resolve())},
            params={"launcher.route": self.launcher.route, "launcher.n_workers": self.n_workers,
                    "launcher.modal.offline": self.offline})

    def finished_hashes(self, jobs: list[Job]) -> set[str]:
        """Config hashes among `jobs` that already have a FINISHED run (resume)."""
        from sweep.recorder import HASH_TAG, config_hash

        wanted = {config_hash(j.config) for j in jobs if j.config is not None}
        if not wanted or self.recorder is None:
            return set()
        if len(wanted) <= 16:  # a query per job is cheapest for a few jobs
            return {h for j in jobs if j.config is not None and self.recorder.finished_run(j.config)
                    for h in [config_hash(j.config)]}
        # MLflow's search has no IN for tags: one pass over the experiment's finished runs
        found: set[str] = set()
        token = None
        while True:
            page = self.recorder.client.search_runs(
                [self.recorder.experiment_id], filter_string="attributes.status = 'FINISHED'",
                max_results=5000, page_token=token)
            found |= {r.data.tags.get(HASH_TAG) for r in page} & wanted
            token = page.token
            if not token:
                return found

    def record(self, job: Job, reply: Reply, ret: JobReturn, status: str = "FAILED") -> None:
        """Write the job's child run (results come here one at a time: the only writer of the store)."""
        from sweep.cost import cost_usd
        from sweep.recording import failed_result
        from sweep.result import RunResult

        if not self.recording:
            return
        if ret.status == JobStatus.COMPLETED:
            result = ret._return_value
            if not isinstance(result, RunResult):
                return
        else:  # status: FAILED, or KILLED for a job cut short by Ctrl-C
            result = failed_result(job.cfg, None, status=status, error=reply.error or "unknown failure")
        route_tags = {"sweep.route": job.where, "hydra.job.num": str(job.idx)}
        if job.where == "modal":
            from hydra_plugins.sweep_launcher._prices import gpu_price_per_hour

            # Modal bills the container's seconds at the GPU's rate (the job's own seconds: a lower bound,
            # container start-up is billed too)
            result.metrics["billed_s"] = reply.wall_s
            result.metrics["cost_usd"] = cost_usd(reply.wall_s,
                                                  gpu_price_per_hour(job.gpu, self.launcher.modal.get("prices")))
            route_tags["modal.gpu"] = str(job.gpu or "cpu")
            route_tags["modal.offline"] = str(self.offline).lower()
        elif result.status == "FINISHED":
            price = float(OmegaConf.select(job.cfg, "device.price_per_hour", default=0.0) or 0.0)
            result.metrics["cpu_s"] = reply.cpu_s
            result.metrics["cost_usd"] = cost_usd(reply.cpu_s, price)
        run_name = OmegaConf.select(job.cfg, "run_name", default=None) or job.name or None
        self.recorder.log(result, parent_run_id=self.parent, run_name=run_name, extra_tags=route_tags)
        self.results.append(result)

    # -- the end ------------------------------------------------------------------------------------------
    def finish(self, status: Optional[str] = None, exit_on_failure: bool = False) -> None:
        if self.finished:
            return
        self.finished = True
        if self.pool is not None:
            self.pool.close(kill=status == "KILLED")
            self.pool = None
        status = status or ("FAILED" if self.failures else "FINISHED")
        if self.recorder is not None and self.parent is not None:
            from mlflow.entities import Metric

            import resource

            now = int(time.time() * 1000)
            # CPU seconds of this process and of its (joined) workers: where a sweep's time goes
            own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            self.recorder.client.log_batch(self.parent, metrics=[
                Metric("sweep_wall_s", time.perf_counter() - self.t0, now, 0),
                Metric("launcher_cpu_s", own.ru_utime + own.ru_stime, now, 0),
                Metric("workers_cpu_s", workers.ru_utime + workers.ru_stime, now, 0),
                Metric("jobs_skipped", float(self.n_skipped), now, 0),
                Metric("jobs_killed", float(self.n_killed), now, 0)])
            self.recorder.end_parent(self.parent, status, self.results)
        n_failed = len(self.failures)
        msg = (f"sweep: {self.n_done} job(s) finished, {n_failed} failed, {self.n_skipped} skipped"
               + (" (already FINISHED; hydra.launcher.force=true re-runs them)" if self.n_skipped else "")
               + (f", {self.n_killed} killed" if self.n_killed else "")
               + (f"; parent run {self.parent} is {status}" if self.parent else ""))
        print(msg, file=sys.stderr if n_failed or status == "KILLED" else sys.stdout, flush=True)
        if n_failed:
            print("sweep: failed jobs:", file=sys.stderr)
            for job, why in self.failures:
                print(f"  {job.label()}: {why}", file=sys.stderr)
            sys.stderr.flush()
            if exit_on_failure:
                raise SystemExit(1)


# -- launch: one batch of the sweeper ---------------------------------------------------------------------------
def _compose(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Job]:
    jobs = []
    for i, overrides in enumerate(job_overrides):
        idx = initial_job_idx + i
        loader = launcher.hydra_context.config_loader
        if hasattr(loader, "take"):  # FastComposer: the sweeper's composition of this job, if it made one
            cfg, template = loader.take(launcher.config, list(overrides))
        else:
            cfg, template = loader.load_sweep_config(launcher.config, list(overrides)), None
        with open_dict(cfg):
            cfg.hydra.job.id = f"{cfg.hydra.job.name}_{idx}"
            cfg.hydra.job.num = idx
        where = route_of(cfg, launcher.route)
        gpu = OmegaConf.select(cfg, "device.gpu", default=None) if where == "modal" else None
        jobs.append(Job(idx=idx, overrides=list(overrides), cfg=cfg, where=where, gpu=gpu, template=template))
    return jobs


def _validate(jobs: list[Job], prices: Optional[str] = None) -> None:
    """Every job's value rules, before any job starts or any run is created; exit 2 on the first bad one."""
    structured = [j for j in jobs if all(k in j.cfg for k in JOB_KEYS)]  # the project's jobs (not test apps)
    if structured:
        from sweep.job import job_config
        from sweep.validate import ConfigError, validate
    for job in structured:
        job.config = job_config(job.cfg)  # resolved once: the rules read it, resume and params use it
        try:
            validate(job.config)
        except ConfigError as e:
            print(f"sweep: config error in job {job.label()}: {e}", file=sys.stderr, flush=True)
            raise SystemExit(2)
    for job in jobs:
        if job.where == "modal":  # a Modal job needs a price for its GPU type before it runs
            from hydra_plugins.sweep_launcher._prices import gpu_price_per_hour

            try:
                gpu_price_per_hour(job.gpu, prices)
            except KeyError as e:
                print(f"sweep: config error in job {job.label()}: device.gpu: {e.args[0]}", file=sys.stderr,
                      flush=True)
                raise SystemExit(2)


def _configs_property(name: str) -> property:
    def get(self: "ReturnedJob") -> Any:
        if self._source is not None:
            self._build()
        return self.__dict__.get(name)

    def set_(self: "ReturnedJob", value: Any) -> None:
        self.__dict__[name] = value

    return property(get, set_)


class ReturnedJob(JobReturn):
    """A worker's JobReturn. Its cfg and hydra_cfg do not travel back (pickling them both ways cost more than
    the rest of a job's overhead): they are rebuilt from the launcher's composed config on first access, with
    the output dir the worker set."""

    _source: Optional[tuple[DictConfig, Optional[str]]] = None
    cfg = _configs_property("cfg")  # type: ignore[assignment]
    hydra_cfg = _configs_property("hydra_cfg")  # type: ignore[assignment]

    @classmethod
    def of(cls, ret: JobReturn, full_cfg: DictConfig, output_dir: Optional[str]) -> "ReturnedJob":
        out = cls(**{k: ret.__dict__.get(k) for k in ("overrides", "working_dir", "task_name", "status",
                                                      "_return_value")})
        out._source = (full_cfg, output_dir)
        return out

    def _build(self) -> None:
        full, output_dir = self._source  # type: ignore[misc]
        self._source = None
        self.__dict__["cfg"] = OmegaConf.masked_copy(full, [k for k in full if k != "hydra"])
        hydra_cfg = OmegaConf.masked_copy(full, "hydra")
        if output_dir is not None:
            with read_write(hydra_cfg.hydra.runtime), open_dict(hydra_cfg.hydra.runtime):
                hydra_cfg.hydra.runtime.output_dir = output_dir
        OmegaConf.set_readonly(hydra_cfg.hydra, True)
        self.__dict__["hydra_cfg"] = hydra_cfg


class IsolatedFailure(ReturnedJob):
    """A FAILED JobReturn whose `return_value` gives the exception instead of raising it, so the sweeper
    goes on with its next batch; the launcher exits non-zero once the whole sweep is recorded."""

    @property  # type: ignore[override]
    def return_value(self) -> Any:
        return self._return_value

    @return_value.setter
    def return_value(self, value: Any) -> None:
        self._return_value = value


def _job_return(job: Job, reply: Reply) -> JobReturn:
    ret = reply.job_return
    if ret is not None:
        return ReturnedJob.of(ret, job.cfg, reply.output_dir)
    if ret is None:  # the job never ran (worker died, Modal refused it): a FAILED return Hydra can read
        task_cfg = OmegaConf.masked_copy(job.cfg, [k for k in job.cfg if k != "hydra"])
        ret = JobReturn(overrides=job.overrides, cfg=task_cfg, hydra_cfg=None, working_dir=None,
                        task_name=str(job.cfg.hydra.job.name), status=JobStatus.FAILED,
                        _return_value=RuntimeError((reply.error or "failed").strip().splitlines()[-1]))
    return ret


def _write_files(job: Job, files: dict[str, str]) -> None:
    """Output files of a job that ran in a Modal container, under its usual local job dir."""
    HydraConfig.instance().set_config(job.cfg)
    out = Path(str(job.cfg.hydra.sweep.dir)) / str(job.cfg.hydra.sweep.subdir)
    for rel, text in files.items():
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    setup_globals()
    cfg: DictConfig = launcher.config
    configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)
    Path(str(cfg.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    run: SweepRun = launcher.sweep or SweepRun(launcher)
    launcher.sweep = run
    needs_pool = launcher.route != "modal" or run.offline
    if needs_pool:  # start the workers now: they import while this process composes
        if run.offline:  # import modal once here, before the fork, not once per worker
            import hydra_plugins.sweep_launcher._modal_app  # noqa: F401
        if run.pool is None:
            # preload serves the project's task; other apps (Hydra's test apps) would only wait for it
            preload = launcher.preload if all(k in cfg for k in JOB_KEYS) else []
            run.pool = Pool(min(run.n_workers, len(job_overrides)), preload)
        else:
            run.pool.grow(min(run.n_workers, len(job_overrides)))
    gc.freeze()  # Hydra's state and the imports stay for the whole sweep: per-job collections skip them
    jobs = _compose(launcher, job_overrides, initial_job_idx)
    for job, name in zip(jobs, run.namer.names([j.overrides for j in jobs], [j.idx for j in jobs])):
        job.name = name
    try:
        _validate(jobs, launcher.modal.get("prices"))
    except SystemExit:
        run.finished = True  # nothing was recorded: no parent run to close
        if run.pool is not None:
            run.pool.close(kill=True)
        raise
    run.start_recording()

    returns: dict[int, JobReturn] = {}
    todo = jobs
    if run.recording and not launcher.force:
        from sweep.recorder import config_hash

        done = run.finished_hashes(jobs)
        todo = [j for j in jobs if j.config is None or config_hash(j.config) not in done]
        for j in jobs:
            if j not in todo:
                task_cfg = OmegaConf.masked_copy(j.cfg, [k for k in j.cfg if k != "hydra"])
                returns[j.idx] = JobReturn(overrides=j.overrides, cfg=task_cfg, task_name=str(j.cfg.hydra.job.name),
                                           status=JobStatus.COMPLETED, _return_value=None)
        run.n_skipped += len(jobs) - len(todo)
        if len(todo) < len(jobs):
            print(f"sweep: skipping {len(jobs) - len(todo)} job(s) that already have a FINISHED run "
                  "(hydra.launcher.force=true re-runs them)", flush=True)
    if todo:
        _dispatch(run, launcher, todo, returns)
    return [returns[j.idx] for j in jobs]


def _dispatch(run: SweepRun, launcher: Any, jobs: list[Job], returns: dict[int, JobReturn]) -> None:
    from hydra_plugins.sweep_launcher._progress import Progress

    session = Session(hydra_context=launcher.hydra_context, task_function=launcher.task_function,
                      singleton_state=Singleton.get_state(), fast=launcher.fast)
    sid = next(_session_ids)
    session_bytes = cloudpickle.dumps(session)
    modal_opts = {k: v for k, v in launcher.modal.items() if k != "offline"}
    local = deque(j for j in jobs if j.where == "local" or run.offline)
    remote = [j for j in jobs if j.where == "modal" and not run.offline]
    by_idx = {j.idx: j for j in jobs}
    loader = launcher.hydra_context.config_loader  # a FastComposer when jobs carry a template id
    stop = threading.Event()
    remote_conn = None
    n_remote_left = len(remote)

    progress = Progress(len(jobs), enabled=launcher.progress)
    interrupt = Interrupt()

    def handle(job: Job, reply: Reply) -> None:
        ret = _job_return(job, reply)
        if reply.files:
            _write_files(job, reply.files)
        interrupt.in_write = True
        try:
            run.record(job, reply, ret)
        finally:
            interrupt.in_write = False
        if ret.status == JobStatus.FAILED:
            why = reply.reason or (reply.error or "failed").strip().splitlines()[-1]
            run.failures.append((job, why))
            failure = IsolatedFailure.__new__(IsolatedFailure)  # the same fields (lazy configs included)
            failure.__dict__.update(ret.__dict__)
            ret = failure
            progress.job_done(job, ok=False, line=f"[FAILED] {job.label()}: {why}")
        else:
            run.n_done += 1
            value = ret._return_value
            line = value.summary(job.label()) if hasattr(value, "summary") else f"[FINISHED] {job.label()}"
            progress.job_done(job, ok=True, line=line)
        returns[job.idx] = ret
        interrupt.check()

    pool = run.pool
    try:
        with interrupt, progress:
            if remote:
                from hydra_plugins.sweep_launcher import _modal_app

                problem = _modal_app.token_problem()
                if problem:  # fail at once, as FAILED runs, with how to set a token up
                    for job in remote:
                        handle(job, Reply(idx=job.idx, job_return=None, error=f"{problem}\n"))
                    n_remote_left = 0
                else:
                    remote_conn, sender = mp.Pipe(duplex=False)
                    payloads = [(j.idx, j.gpu, cloudpickle.dumps(
                        {"session": session, "idx": j.idx, "cfg_bytes": cloudpickle.dumps(j.cfg), "collect_files": True}))
                                for j in remote]
                    for j in remote:
                        j.started = time.perf_counter()
                        progress.job_started(j)
                    threading.Thread(target=_modal_app.run_remote, args=(payloads, modal_opts, sender, stop),
                                     daemon=True, name="sweep-modal").start()
            def refill() -> None:
                # Two jobs per worker: the next one waits in the pipe, so a worker never idles while this
                # process records the previous result.
                for w in pool.workers if pool is not None else []:
                    while local and len(w.jobs) < PER_WORKER:
                        job = local.popleft()
                        if sid not in w.sessions:
                            w.conn.send_bytes(cloudpickle.dumps(("session", sid, session_bytes)))
                            w.sessions = {sid}
                        via = {**modal_opts, "gpu": job.gpu} if job.where == "modal" else None
                        tpl = None
                        if job.template is not None:  # its hydra section goes to each worker once
                            doc = None if job.template in w.templates else loader.hydra_doc(job.template)
                            tpl = (job.template, doc)
                            w.templates.add(job.template)
                        msg = ("job", sid, job.idx, dump_config(job.cfg), via, tpl)
                        try:
                            w.conn.send_bytes(pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL))
                        except Exception:  # noqa: BLE001 - Modal options holding something pickle refuses
                            w.conn.send_bytes(cloudpickle.dumps(msg))
                        w.jobs.append(job)
                        job.started = time.perf_counter()
                progress.running_now(sum(1 for w in pool.workers if w.jobs) if pool is not None else 0)

            while local or n_remote_left or (pool and any(w.jobs for w in pool.workers)):
                refill()
                busy = [w for w in pool.workers if w.jobs] if pool is not None else []
                waitables: list[Any] = [w.conn for w in busy] + [w.proc.sentinel for w in busy]
                if remote_conn is not None and n_remote_left:
                    waitables.append(remote_conn)
                ready = set(wait(waitables, timeout=1.0))
                arrived: list[tuple[Job, Reply]] = []
                if remote_conn is not None and remote_conn in ready:
                    reply: Reply = cloudpickle.loads(remote_conn.recv_bytes())
                    n_remote_left -= 1
                    arrived.append((by_idx[reply.idx], reply))
                for w in busy:
                    if w.conn not in ready and w.proc.sentinel not in ready:
                        continue
                    try:
                        data = w.conn.recv_bytes() if w.conn.poll() else None
                    except (EOFError, OSError):
                        data = None
                    job = w.jobs.popleft()
                    if data is not None:
                        arrived.append((job, cloudpickle.loads(data)))
                        continue
                    # the worker died with the job (os._exit, OOM kill, segfault); its queued jobs go back
                    w.proc.join(timeout=1)
                    why = f"worker process {w.proc.pid} died (exit code {w.proc.exitcode}) while running the job"
                    arrived.append((job, Reply(idx=job.idx, job_return=None, error=why + "\n", reason=why)))
                    local.extendleft(reversed(w.jobs))
                    pool.replace(w)
                refill()  # before recording: the workers go on meanwhile
                for job, reply in arrived:
                    handle(job, reply)
                progress.refresh()
    except Interrupted as e:
        Interrupt.ignore()  # a second signal must not cut the recording short
        stop.set()
        running = [w.jobs[0] for w in pool.workers if w.jobs] if pool is not None else []
        local.extend(j for w in (pool.workers if pool is not None else []) for j in list(w.jobs)[1:])
        running += [j for j in remote if j.idx not in returns]
        if pool is not None:
            pool.close(kill=True)
            run.pool = None
        for job in running:
            run.record(job, Reply(idx=job.idx, job_return=None,
                                  error=f"interrupted ({e.name}) while the job was running\n"),
                       JobReturn(status=JobStatus.FAILED), status="KILLED")
        run.n_killed += len(running)
        not_started = len(local)
        print(f"\nsweep: interrupted by {e.name}: {len(running)} running job(s) recorded KILLED, "
              f"{not_started} not started", file=sys.stderr, flush=True)
        run.finish(status="KILLED")
        raise SystemExit(e.exit_code)
