"""One batch of jobs, from the first job sent to the last reply: the local pool, the backends, the hooks, signals.

Local workers get two jobs each (the next waits in the pipe, so a worker never idles while this process hands
the previous result to the hooks); each backend's jobs go out from a thread and their replies come back on a pipe.
The loop waits on every pipe and on every worker's exit at once, so a worker that dies is seen at once.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import pickle
import threading
import time
from collections import deque
from contextlib import contextmanager
from functools import partial
from multiprocessing.connection import wait
from typing import Any, Iterator, Optional, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.sweep_launcher._batches import backend_units, take, units
from hydra_plugins.sweep_launcher._core import (
    Reply,
    Session,
    Spec,
    dump_config,
    load_reply,
    make_batch_payload,
    make_payload,
    split_replies,
)
from hydra_plugins.sweep_launcher._jobs import IsolatedFailure, Job, compose, composer, job_return, write_files
from hydra_plugins.sweep_launcher._pickling import dumps
from hydra_plugins.sweep_launcher._pool import Pool, Worker, cpu_limit_ended, cpu_seconds
from hydra_plugins.sweep_launcher._progress import JOBS_IN_SWEEP
from hydra_plugins.sweep_launcher._signals import Interrupt, Interrupted, defer
from hydra_plugins.sweep_launcher._stopping import CannotGoOn, HooksFailed, Stopping
from hydra_plugins.sweep_launcher._time_limit import MARK, begin, clock, overdue, settle, stop, taken, wait_s
from hydra_plugins.sweep_launcher.backends import Backend
from hydra_plugins.sweep_launcher.hooks import LaunchHooks, Outcome, Tally

PER_WORKER = 2  # jobs in flight per local worker
_session_ids = itertools.count(1)


class Dispatcher(Stopping):
    def __init__(
        self,
        launcher: Any,
        jobs: Sequence[Job],
        pool: Optional[Pool],
        hooks: Sequence[LaunchHooks],
        tally: Tally,
        backends: Optional[dict[str, Backend]] = None,
        expected: Optional[dict[int, float]] = None,
        earlier: Any = None,
    ) -> None:
        """`expected`: job index -> the seconds the hooks expect it to take (`JobPlan.expected_s`), for the ETA;
        `earlier`: the sweep's previous launch's Progress (a search's later launches count on from it)."""
        from hydra_plugins.sweep_launcher._progress import Progress  # noqa: PLC0415 - rich's progress bar: once a batch dispatches, not at plugin scan

        self.launcher = launcher
        self.hooks = list(hooks)
        self.tally = tally
        self.pool = pool
        self.timed = any(j.time_limit_s is not None for j in jobs)  # a job has a time limit (_time_limit.py)
        self.isolate = bool(hooks)  # with hooks, a failure does not stop the sweeper (see hooks.py)
        self.session = Session(
            hydra_context=launcher.hydra_context,
            task_function=launcher.task_function,
            singleton_state=Singleton.get_state(),
            fast=launcher.fast,
            batcher=next((h for h in hooks if type(h).run_batch is not LaunchHooks.run_batch), None),
            time_limited=self.timed,
        )
        self.sid = next(_session_ids)
        self.session_bytes = dumps(self.session)
        # each job's place: this machine's workers, or a backend (one that runs on the workers: Modal offline)
        self.backends = backends if backends is not None else {}
        here = [j for j in jobs if j.where == "local" or self._on_workers(j)]
        # a job whose backend cannot run here (its package missing: `Backend.missing`) fails at once, with how to fix it
        self.missing = {name: b.missing() for name, b in self.backends.items() if any(j.where == name for j in jobs)}
        self.unplaceable = [j for j in jobs if j.where != "local" and self.missing.get(j.where)]
        # by index: `j in a_list` compares jobs field by field (a 10,000-job grid: ~50 CPU s before its first job)
        unplaceable, local = {j.idx for j in self.unplaceable}, {j.idx for j in here}
        self.local = deque(j for j in here if j.idx not in unplaceable)
        self.remote = [j for j in jobs if j.idx not in local and j.idx not in unplaceable]
        self.by_idx = {j.idx: j for j in jobs}
        self.loader = launcher.hydra_context.config_loader  # a FastComposer when jobs carry a template id
        self.returns: dict[int, JobReturn] = {}
        self.stop = threading.Event()
        self.remote_conn: Any = None
        self.n_remote_left = len(self.remote)
        self.remote_batches: dict[int, list[Job]] = {}  # a batch sent to a backend, by its first job's index
        titles = [t for t in (h.title(launcher.config) for h in self.hooks) if t]
        title = titles[0] if titles else str(OmegaConf.select(launcher.config, "hydra.job.name", default="sweep"))
        slots = (len(pool.workers) if pool is not None and self.local else 0) + len(self.remote)
        self.progress = Progress(
            len(jobs),
            enabled=launcher.progress,
            title=title,
            slots=slots,
            expected=expected,
            earlier=earlier,
            in_sweep=getattr(launcher, JOBS_IN_SWEEP, None),
        )
        self.interrupt = Interrupt(hold_after=bool(hooks))
        # results read from the workers and not yet handed over: a stop hands them over first (`_take_arrived`)
        self.arrived: deque[tuple[Job, Reply]] = deque()

    # -- the loop ------------------------------------------------------------------------------------------
    def run(self) -> dict[int, JobReturn]:
        try:
            with self.interrupt, self.progress:
                for job in self.unplaceable:
                    self._handle(job, Reply(idx=job.idx, job_return=None, error=f"{self.missing[job.where]}\n"))
                if self.remote:
                    self._start_remote()
                while self.local or self.n_remote_left or self._busy():
                    self._refill()
                    self.arrived.extend(self._collect())
                    self._refill()  # before handing results over: the workers go on meanwhile
                    while self.arrived:
                        self._handle(*self.arrived[0])
                        self.arrived.popleft()
                    self.progress.refresh()
        except Interrupted as e:
            self._take_arrived()
            if len(self.returns) < len(self.by_idx):
                self._interrupted(e)
            else:  # every job was recorded (the signal came at the last one's line): the sweep ran whole
                defer(e.signum)
        except HooksFailed as e:
            self._abort(str(e))
        except CannotGoOn as e:
            where = OmegaConf.select(self.launcher.config, "hydra.sweep.dir", default="?")
            self._cannot_go_on(f"the disk that holds the jobs' directories (hydra.sweep.dir={where}) is full ({e})")
        return self.returns

    def _busy(self) -> list[Worker]:
        return [w for w in self.pool.workers if w.jobs] if self.pool is not None else []

    def _refill(self) -> None:
        workers = self.pool.workers if self.pool is not None else []
        for w in list(workers):
            if w.gone and not w.jobs:  # its replies all read: a fresh worker takes its place
                self.pool.replace(w)  # type: ignore[union-attr]
        # breadth first: every worker gets a task before any gets its second, else a sweep of as many batches
        # as 2 x workers would queue them all on the first workers and leave the others idle. A second task
        # waits behind a lone job only, whose round trip it hides: behind a batch it would fix which worker runs
        # the next batch before either is free, and a sweep's last batches could end on one worker while the
        # other idles
        for depth in range(1, PER_WORKER + 1):
            for w in workers:
                if self.local and units(w.jobs) < depth and len(w.jobs) < depth and not w.gone:
                    self._send(w, take(self.local))
        self.progress.running_now(len(self._busy()))

    def _send(self, w: Worker, jobs: list[Job]) -> None:
        """Send `jobs` (one, or a batch) to `w`; a worker found dead (it exited between jobs) gets nothing more:
        the jobs go back to the front of the queue, and the worker is replaced once its replies already sent are
        read."""
        try:
            if self.sid not in w.sessions:
                w.conn.send_bytes(dumps(("session", self.sid, self.session_bytes)))
                w.sessions = {self.sid}
            w.conn.send_bytes(self._job_message(w, jobs))
        except OSError:  # BrokenPipeError, ConnectionResetError: the job never reached the worker
            w.gone = True
            self.local.extendleft(reversed(jobs))
            return
        idle = not w.jobs
        w.jobs.extend(jobs)
        for job in jobs:
            job.started = time.perf_counter()
        if idle:
            begin(w)

    def _composed(self, job: Job) -> Any:
        """The job's config, composed just before it goes out and kept only while the job is in flight: the
        dispatcher holds a few configs, not the grid's."""
        if job.cfg is None:
            job.cfg, job.template = compose(self.launcher, job.overrides, job.idx)
        return job.cfg

    @contextmanager
    def _for_hooks(self, job: Job) -> Iterator[None]:
        """While a job's outcome is handed over: its config, where it has none in flight, composed only if read
        (one job at a time: `compose`'s in_turn), and dropped after."""
        if job.again is not None or job.cfg is not None:  # in that order: reading cfg would compose it
            yield
            return
        job.again = partial(self._in_turn, job)
        try:
            yield
        finally:
            job.again, job.cfg = None, None

    def _in_turn(self, job: Job) -> DictConfig:
        cfg, job.template = compose(self.launcher, job.overrides, job.idx, in_turn=True)
        return cfg

    def _config(self, job: Job, via: Any) -> Any:
        """The job's config as it goes to a local worker: what the worker adds to the job's template
        (`_fast/template`), where the job has one and runs on the worker itself; else composed and pickled whole."""
        if via is None and job.template is not None and self.session.fast:
            overrides, values = self.loader.given(job.overrides)
            cache = OmegaConf.get_cache(self.launcher.config)
            return Spec(template=job.template, overrides=overrides, values=values, num=job.idx, cache=cache)
        return dump_config(self._composed(job))

    def _template(self, w: Worker, job: Job) -> Any:
        if job.template is None:
            return None
        # each worker gets a template once: its hydra section (plain data) and the template pickled (_template)
        sent = job.template in w.templates
        w.templates.add(job.template)
        return (
            job.template,
            None if sent else (self.loader.hydra_doc(job.template), *self.loader.pickled(job.template)),
        )

    def _job_message(self, w: Worker, jobs: list[Job]) -> bytes:
        job = jobs[0]
        via = (self.backends[job.where], job.gpu) if self._on_workers(job) else None
        # each job's config first: a job's template id is set as it is composed
        items = [(j.idx, self._config(j, via)) for j in jobs]
        if len(jobs) > 1:  # a batch (_batches.py)
            msg: tuple = ("batch", self.sid, [(i, c, self._template(w, j)) for (i, c), j in zip(items, jobs)], via)
        else:
            msg = ("job", self.sid, *items[0], via, self._template(w, job))
        try:
            return pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - a backend holding something pickle refuses
            return dumps(msg)

    def _collect(self) -> list[tuple[Job, Reply]]:
        busy = self._busy()
        waitables: list[Any] = [w.conn for w in busy] + [w.proc.sentinel for w in busy]
        if self.remote_conn is not None and self.n_remote_left:
            waitables.append(self.remote_conn)
        ready = set(wait(waitables, timeout=wait_s(busy, 1.0)))
        arrived: list[tuple[Job, Reply]] = []
        if self.remote_conn is not None and self.remote_conn in ready:
            idx, data = pickle.loads(self.remote_conn.recv_bytes())
            members = self.remote_batches.get(idx, [self.by_idx[idx]])
            replies = split_replies(data, [j.idx for j in members]) if len(members) > 1 else [data]
            self.n_remote_left -= len(members)
            arrived += [(j, load_reply(d, j.idx)) for j, d in zip(members, replies)]
        for w in busy:
            if w.conn not in ready and w.proc.sentinel not in ready:
                continue
            try:
                data = w.conn.recv_bytes() if w.conn.poll() else None
            except (EOFError, OSError):
                data = None
            if data is not None and data.startswith(MARK):  # the app says what the time limit covers now
                clock(w, data)
                continue
            if data is not None:
                job = w.jobs.popleft()
                arrived.append((job, load_reply(data, job.idx)))
                taken(w, job)
                continue
            # the worker died with its task (os._exit, OOM kill, kill -9); its queued jobs go back
            used = cpu_seconds(w.proc.pid)  # (before its exit code is asked: that reaps it)
            w.proc.join(timeout=1)
            why = cpu_limit_ended(used, w.proc.exitcode)
            died = f"worker process {w.proc.pid} died (exit code {w.proc.exitcode})"
            job_line = f"{died} while running the job{why}"
            arrived += settle(w, self.local, lambda _: (job_line, None), f"a batch's {died}{why}")
            assert self.pool is not None
            self.pool.replace(w)
        for w in overdue(busy) if self.timed else []:
            arrived += stop(w, self.local)
            assert self.pool is not None
            self.pool.replace(w)
        return arrived

    # -- one result ------------------------------------------------------------------------------------------
    def _handle(self, job: Job, reply: Reply) -> None:
        try:
            with self._for_hooks(job):
                self._take(job, reply)
        finally:
            job.cfg = None  # the job is over: its config goes

    def _take(self, job: Job, reply: Reply) -> None:
        ret = job_return(job, reply, composer(self.launcher, job))
        if reply.files:
            write_files(job, reply.files)
        ok = ret.status == JobStatus.COMPLETED
        # the hooks read a failure's exception through return_value, which Hydra's JobReturn would raise
        failure = None if ok else IsolatedFailure.from_return(ret)
        outcome = Outcome(
            status="FINISHED" if ok else "FAILED",
            job_return=failure or ret,
            error=reply.error,
            reason=reply.reason,
            wall_s=reply.wall_s,
            cpu_s=reply.cpu_s,
            offline=self._on_workers(job),
            time_limit_s=reply.time_limit_s,
        )
        why = "" if ok else reply.reason or (reply.error or "failed").strip().splitlines()[-1]
        self.interrupt.in_write = True  # recorded, counted and kept as one step: a signal waits for all of it
        try:
            line = self._tell(job, outcome)
            if ok:
                self.tally.done += 1
            else:
                self.tally.failures.append((job.label(), why))
                ret = failure if self.isolate and failure is not None else ret
            self.returns[job.idx] = ret
        finally:
            self.interrupt.in_write = False
        if ok:
            self.progress.job_done(job, ok=True, line=line or f"[FINISHED] {job.label()}", seconds=outcome.wall_s)
        else:
            self.progress.job_done(job, ok=False, line=f"[FAILED] {job.label()}: {why}", seconds=outcome.wall_s)
        self.interrupt.check()
        if reply.stop:
            raise CannotGoOn(reply.stop)

    def _tell(self, job: Job, outcome: Outcome) -> Optional[str]:
        """Hand one outcome to the hooks, return the first line they give; a signal waits for their writes."""
        was, self.interrupt.in_write = self.interrupt.in_write, True
        try:
            with self._for_hooks(job):  # a job cut short: its config composed for the hooks alone
                lines = [h.job_ended(job, outcome) for h in self.hooks]
            return next((line for line in lines if line is not None), None)
        except Exception as e:  # noqa: BLE001 - surfaced as one line by _abort
            raise HooksFailed(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__) from e
        finally:
            self.interrupt.in_write = was

    # -- backends (Modal, an app's own) -------------------------------------------------------------------------
    def _on_workers(self, job: Job) -> bool:
        backend = self.backends.get(job.where)
        return backend is not None and backend.on_workers

    def _start_remote(self) -> None:
        """Each backend's units (a job, or a batch answered under its first job's index) go out from a thread of
        its own; every answer comes back on one pipe, which the loop waits on with the workers'."""
        self.remote_conn, sender = mp.Pipe(duplex=False)
        lock = threading.Lock()

        def reply(idx: int, data: bytes) -> None:
            with lock:
                sender.send_bytes(pickle.dumps((idx, data), protocol=pickle.HIGHEST_PROTOCOL))

        by_place: dict[str, list[Job]] = {}
        for j in self.remote:
            by_place.setdefault(j.where, []).append(j)
        for where, jobs in by_place.items():
            backend = self.backends[where]
            # a backend's machine has nothing of this process: the config by cloudpickle (a script's classes by value)
            files = backend.collect_files
            units = backend_units(
                jobs,
                lambda j: make_payload(self.session_bytes, self._remote_config(j), files),
                lambda u: make_batch_payload(self.session_bytes, [(j.idx, self._remote_config(j)) for j in u], files),
                self.remote_batches,
            )
            for j in jobs:
                j.started = time.perf_counter()
                self.progress.job_started(j)
            threading.Thread(
                target=backend.run, args=(units, reply, self.stop), daemon=True, name=f"sweep-{where}"
            ).start()

    def _remote_config(self, job: Job) -> bytes:
        try:
            return dumps(self._composed(job))
        finally:
            job.cfg = None  # composed again when its reply comes
