"""One batch of the sweeper, in the launching process: every job checked before any starts, then the rest
handed to the dispatcher, both as streams.

A job is held small (`_jobs.Job`: index, overrides, name, the app's plan and notes). The check is one pass over
the batch: each job composed, shown to the app's hooks (`plan`'s stream: they answer with the job's `JobPlan`),
then its config dropped.
Jobs that differ only in plain values are composed on one working config per shape, with their task part resolved
as plain data (`FastComposer.take_planned`, `PlannedJob.resolved`): tens of µs a job, whatever the grid's size.
The dispatcher composes each job again just before it goes to a worker. Memory before the first job is thus
flat in the grid's size, whatever the grid.

A `Multirun` lives for all of the sweeper's batches: the app's hooks (taken once), the tally they are told
at the end, and the local worker pool. Only this process talks to the hooks (and so writes the app's store):
workers and backends (Modal containers) send back a `_core.Reply`.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Hashable, Iterator, NoReturn, Optional, Sequence

from hydra.core.utils import JobReturn, configure_log, setup_globals
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.sweep_launcher import hooks as hooks_mod
from hydra_plugins.sweep_launcher._batches import batched
from hydra_plugins.sweep_launcher._jobs import Job, compose, composer, job_id, skipped_return
from hydra_plugins.sweep_launcher._pool import Pool, shell_limit
from hydra_plugins.sweep_launcher._progress import JOBS_IN_SWEEP
from hydra_plugins.sweep_launcher._signals import Interrupt, Interrupted, as_interrupted, check_pending, hold
from hydra_plugins.sweep_launcher.backends import Unready, backends
from hydra_plugins.sweep_launcher.hooks import JobPlan, LaunchHooks, Refused, Tally, batch_size, time_limit
from hydra_plugins.sweep_launcher.naming import Namer


def at_least_one(key: str, requested: Any, meaning: str) -> int:
    """A launcher setting that must be an integer >= 1: anything else is refused in one line naming `key` and what
    is allowed, exit 2, before any worker or job starts."""
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        print(f"sweep: {key}={requested!r} is not allowed: expected {meaning}", file=sys.stderr, flush=True)
        raise SystemExit(2)
    return requested


# Modal's Function settings, each an integer from its least (timeout: seconds a job, at most Modal's 24 hours):
# -1 retries was taken as none and max_containers=0 as a Function no job could run in, found only on Modal
MODAL_RANGES = {"timeout": (1, 24 * 3600), "retries": (0, None), "max_containers": (1, None)}


def modal_settings(opts: Any) -> None:
    """Refused (exit 2) where a `hydra.launcher.modal.*` setting is out of its range, before any job, wherever the
    jobs go (a sweep's jobs are placed on Modal one by one, after some have run here)."""
    for name, (least, most) in MODAL_RANGES.items():
        value = (opts or {}).get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least or (most and value > most):
            allowed = f"an integer from {least} to {most}" if most else f"an integer >= {least}"
            raise Refused(f"sweep: hydra.launcher.modal.{name}={value!r} is not allowed: expected {allowed}")


def cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's or `taskset`'s share), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(requested: Any, local: bool = True) -> int:
    """hydra.launcher.n_workers: an integer >= 1, or null for one worker per CPU; fewer than one worker would leave
    every job waiting forever. `local`: the workers are processes of this machine, at most one per CPU it gives
    the sweep (more would only share the CPUs, each a process and its memory: 100000 once started 40 on 2 cores),
    said in one line when the request is cut."""
    if requested is None:
        return cpus()
    n = at_least_one("hydra.launcher.n_workers", requested, "an integer >= 1, or null (one worker per CPU)")
    if local and n > cpus():
        print(
            f"sweep: hydra.launcher.n_workers={n} is more than the {cpus()} CPU(s) this machine gives the sweep: "
            f"{cpus()} worker(s)",
            file=sys.stderr,
            flush=True,
        )
        return cpus()
    return n


class Multirun:
    def __init__(self, launcher: Any) -> None:
        cfg: DictConfig = launcher.config
        self.hooks: list[LaunchHooks] = hooks_mod.take()
        try:  # the launcher's own settings; null: each job's plan says (else 1, no limit)
            self.batch = batch_size(launcher.batch, "hydra.launcher.batch") if launcher.batch is not None else None
            self.time_limit = time_limit(launcher.time_limit_s, "hydra.launcher.time_limit_s")
            modal_settings(launcher.modal)
        except Refused as e:
            print(str(e), file=sys.stderr, flush=True)
            raise SystemExit(e.code) from None
        self.tally = Tally()
        self.backends = backends({"modal": launcher.modal}, launcher.backends)  # where jobs run but here: chosen once
        self.unready: dict[str, Optional[Unready]] = {}  # a backend's answer, asked at its first job
        routed = self.backends.get(launcher.route)
        self.n_workers = worker_count(launcher.n_workers, local=routed is None or routed.on_workers)
        self.tally.launcher = {
            "name": str(OmegaConf.select(cfg, "hydra.runtime.choices.hydra/launcher", default=launcher.route)),
            "route": launcher.route,
            "n_workers": self.n_workers,
            "force": launcher.force,
            "batch": self.batch,
            "modal.offline": self.backends["modal"].on_workers,
            "time_limit_s": self.time_limit,
        }
        self.tally.closers.append(self.close_pool)
        for h in self.hooks:
            h.driven, h.tally = True, self.tally  # driven travels to the workers with Hydra's context
        self.pool: Optional[Pool] = None
        self.namer = Namer.for_multirun(cfg.hydra)
        # the last launch's progress: a search's next launch counts on from it, and only the sweep's first (a
        # resumed search's too, numbered on) announces an estimate
        self.progress: Any = None

    def close_pool(self, kill: bool = False) -> None:
        if self.pool is not None:
            self.pool.close(kill=kill)
            self.pool = None

    def planned(self, job: Job, plan: JobPlan) -> None:
        """The app's plan of a job, over the launcher's own settings (route, batch, time limit)."""
        job.plan = plan
        job.where, job.gpu = job.place(plan.where, plan.gpu)
        job.time_limit_s = self.time_limit if self.time_limit is not None else plan.time_limit_s

    def batch_of(self, job: Job) -> int:
        """The most jobs of its key solved together: hydra.launcher.batch, else the app's plan."""
        return self.batch if self.batch is not None else job.plan.batch

    def batch_key(self, job: Job) -> Optional[Hashable]:
        """What a job may share a batch under, where it runs (one local worker, or one backend's GPU type); None:
        it runs alone."""
        k = job.plan.batch_key
        return None if k is None else (job.where, job.gpu, k)

    def ready(self, jobs: list[Job]) -> None:
        """Jobs placed on a backend that cannot take them now (Modal without its token, asked once a sweep) are
        left out where others run here; where none would, the sweep is refused: one line, exit 2, before any job
        starts. What runs them here comes first (the app's plan, else the backend's word), then the backend's
        fix."""
        for j in jobs:
            if j.where in self.backends and j.where not in self.unready:
                self.unready[j.where] = self.backends[j.where].unready()
            j.left_out = self.unready.get(j.where) is not None
        if jobs and all(j.left_out for j in jobs):
            unready = self.unready[jobs[0].where]
            assert unready is not None
            instead = next((said for j in jobs if j.plan.instead is not None and (said := j.plan.instead())), None)
            raise Refused("sweep: " + unready.refusal.format(n=len(jobs), instead=instead or unready.instead))


# a check pass that goes on this long, over at least this many jobs, says how far it is (a million jobs' pass takes
# a minute or more before the first job, which was silent)
PACE_AFTER_S, PACE_MIN_JOBS = 2.0, 1000


class Pace:
    """A line on stderr at each tenth of a long check pass: `sweep: checked 300,000 of 1,000,000 job(s) (30%, 31 s);
    none starts before all are`. Nothing for a pass that ends within PACE_AFTER_S or has under PACE_MIN_JOBS."""

    def __init__(self, total: int) -> None:
        self.total, self.t0, self.step = total, time.monotonic(), max(1, -(-total // 10))

    def __call__(self, done: int) -> None:
        if self.total < PACE_MIN_JOBS or done % self.step and done != self.total:
            return
        seconds = time.monotonic() - self.t0
        if seconds >= PACE_AFTER_S:
            print(
                f"sweep: checked {done:,} of {self.total:,} job(s) ({done / self.total:.0%}, {seconds:.0f} s); "
                "none starts before all are",
                file=sys.stderr,
                flush=True,
            )


class Stream:
    """The batch's jobs one at a time, each composed while it is the current one. The first pass also plans each
    job by the launcher's settings alone, until the app's plan says more; at its end, with every job drawn and the
    plans said so far, it looks for each backend's readiness (`Multirun.ready`), before the app's plan is over (the
    app opens its records once it has seen every job)."""

    def __init__(self, launcher: Any, run: "Multirun", jobs: list[Job]) -> None:
        self.launcher, self.run, self.jobs = launcher, run, jobs
        self.placed = False

    def __iter__(self) -> Iterator[Job]:
        place = not self.placed
        master = self.launcher.config
        take_planned = getattr(self.launcher.hydra_context.config_loader, "take_planned", None)  # FastComposer's
        name = str(master.hydra.job.name)
        route = self.launcher.route if self.launcher.route != "device" else None
        pace = Pace(len(self.jobs)) if place else lambda done: None
        for done, job in enumerate(self.jobs, 1):
            planned = take_planned(master, job.overrides, job_id(name, job.idx), job.idx) if take_planned else None
            if planned is not None:
                job.cfg, job.template, job.resolved = planned
            else:
                job.cfg, job.template = compose(self.launcher, job.overrides, job.idx, in_turn=True)
            if place:
                job.route = route
                self.run.planned(job, JobPlan())
            try:
                yield job
            finally:
                job.cfg = job.resolved = None
            pace(done)
        if place:
            self.placed = True
            self.run.ready(self.jobs)


def drain(it: Iterator[Job]) -> None:
    """The jobs a hook did not draw (it stopped early): placed all the same."""
    for _ in it:
        pass


def left_out_arms(jobs: list[Job]) -> str:
    """Which jobs were left out: by the overrides only they have (`device=cuda`; a preset's cuda arms)."""
    kept = {o for j in jobs if not j.left_out for o in j.overrides}
    arms: dict[str, list[str]] = {}
    for j in jobs:
        for o in j.overrides if j.left_out else ():
            key, _, value = o.partition("=")
            if o not in kept and value not in arms.setdefault(key, []):
                arms[key].append(value)
    placed = f"placed on {next(j.where for j in jobs if j.left_out)}"
    return " ".join(f"{k}={','.join(v)}" for k, v in arms.items() if v) or placed


def plan(launcher: Any, run: Multirun, jobs: list[Job]) -> None:
    """Every job checked before any starts, as a stream: each hook's `plan` over the batch (exit 2 on a refused
    job, or the code the hooks give), each job's plan kept on it (`Job.plan`: the last one the hooks said). Without
    hooks, one pass places the jobs."""
    stream = Stream(launcher, run, jobs)
    by_idx = {j.idx: j for j in jobs}
    try:
        for h in run.hooks:
            it = iter(stream)
            for idx, said in h.plan(it):
                run.planned(by_idx[idx], said)
            drain(it)
        if not stream.placed:
            drain(iter(stream))
        run.ready(jobs)  # plans said after the pass
    except Refused as e:
        check_pending()  # a signal that broke what the hooks were doing (their store's making) is what stops it
        run.tally.close()  # nothing runs: no worker may stay
        forget_sweep_dir(Path(str(launcher.config.hydra.sweep.dir)))
        print(str(e), file=sys.stderr, flush=True)
        raise SystemExit(e.code) from None


def forget_sweep_dir(path: Path) -> None:
    """A sweep refused before any job leaves nothing behind: the `multirun.yaml` Hydra's sweeper wrote before
    launching, where it is all the folder holds, and then each folder that leaves empty (the time's, the date's,
    `multirun`); a folder holding anything else is left as it is."""
    try:
        if [p.name for p in path.iterdir()] != ["multirun.yaml"]:
            return
        (path / "multirun.yaml").unlink()
        for folder in (path, path.parent, path.parent.parent):
            folder.rmdir()  # OSError once one is not empty: the rest are left
    except OSError:
        pass


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    setup_globals()
    cfg: DictConfig = launcher.config
    configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)
    Path(str(cfg.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    run: Multirun = launcher.multirun or Multirun(launcher)
    launcher.multirun = run
    returns: dict[int, JobReturn] = {}
    try:  # until the dispatcher's loop listens, a signal ends the sweep here, before any job of the batch starts
        jobs, dispatcher = prepare(launcher, run, job_overrides, initial_job_idx, returns)
    except KeyboardInterrupt as e:
        interrupted_before_any_job(run, as_interrupted(e))
    except Exception as e:
        failed_before_any_job(run)
        if (line := shell_limit(e)) is None:
            raise
        print(f"sweep: {line}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    try:
        if dispatcher is not None:
            run.progress = dispatcher.progress  # the next launch (a search's next trials) counts on from it
            returns.update(dispatcher.run())
    finally:
        if not run.hooks:  # no hooks will say when the sweep ends (an app of its own, Hydra's tests): the workers
            run.close_pool()  # go with each launch (a fork starts them again in milliseconds), not with the process
    if run.hooks:  # from the last job to the sweep's end (the hooks close it: `LaunchHooks`), a signal waits
        hold()
    return [returns[j.idx] for j in jobs]


def prepare(
    launcher: Any,
    run: Multirun,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
    returns: dict,
) -> tuple[list[Job], Any]:
    """The batch's jobs, every one checked (`plan`), the skipped ones' returns put in `returns`, and the dispatcher
    of the rest (None: nothing to run)."""
    from hydra_plugins.sweep_launcher._dispatch import Dispatcher  # noqa: PLC0415 - the dispatcher (rich, pipes): on the first launch, not at plugin scan

    cfg: DictConfig = launcher.config
    routed = run.backends.get(launcher.route)
    if routed is None or routed.on_workers:  # start the workers now: they import while this process checks
        n = min(run.n_workers, len(job_overrides))
        if run.pool is None:
            run.pool = Pool(n, [*launcher.preload, *(m for h in run.hooks for m in h.preload)])
        else:
            run.pool.grow(n)
    jobs = [Job(idx=initial_job_idx + i, overrides=list(o)) for i, o in enumerate(job_overrides)]
    for job, name in zip(jobs, run.namer.names([j.overrides for j in jobs], [j.idx for j in jobs])):
        job.name = name
    # Hydra's state, the imports and the batch's jobs stay for the whole sweep: collections skip them (else each
    # full collection of a big grid's check pass rescans every job)
    gc.freeze()
    plan(launcher, run, jobs)
    check_pending()  # a signal whose exception a callback swallowed while the hooks made their records
    done = {j.idx for j in jobs if j.plan.done and j.plan.skip is None}
    if done and not launcher.force:
        run.tally.skipped += len(done)
        print(
            f"sweep: skipping {len(done)} job(s) already done ({hooks_mod.rerun_hint(run.tally.force_key)})", flush=True
        )
    else:
        done = set()
    others = {j.idx: j.plan.skip for j in jobs if j.plan.skip is not None}
    for why, n in Counter(others.values()).items():
        run.tally.skipped_for[why] = run.tally.skipped_for.get(why, 0) + n
        print(f"sweep: skipping {n} job(s): {why}", flush=True)
    task_name = str(cfg.hydra.job.name)
    for j in jobs:
        if j.idx in done or j.idx in others:
            returns[j.idx] = skipped_return(j, composer(launcher, j), task_name)
    left = [j for j in jobs if j.left_out and j.idx not in returns]
    if left:
        for j in left:
            returns[j.idx] = skipped_return(j, composer(launcher, j), task_name)
        run.tally.left_out += len(left)
        unready = run.unready[left[0].where]
        assert unready is not None
        run.tally.left_out_note = f"{left_out_arms(jobs)}: {unready.note}"
        print(
            f"sweep: leaving out {len(left)} job(s), {run.tally.left_out_note}; to run them, {unready.fix} and run "
            "this command again (what is done is skipped)",
            flush=True,
        )
    if returns and (in_sweep := getattr(launcher, JOBS_IN_SWEEP, None)) is not None:  # a search's skipped jobs are
        setattr(launcher, JOBS_IN_SWEEP, max(0, in_sweep - len(returns)))  # out of its progress, as a grid's are
    todo = batched([j for j in jobs if j.idx not in returns], run.batch_key, run.batch_of, run.n_workers)
    if not todo:
        if run.progress is not None:  # (its last line said 2/3 where a search's last launch was skipped)
            run.progress.recount(getattr(launcher, JOBS_IN_SWEEP, None))
        return jobs, None
    expected = {j.idx: j.plan.expected_s for j in todo if j.plan.expected_s is not None}  # for the ETA
    return jobs, Dispatcher(launcher, todo, run.pool, run.hooks, run.tally, run.backends, expected, run.progress)


def failed_before_any_job(run: Multirun) -> None:
    """An unexpected error while the batch's jobs were checked (a bug: not a refusal, which is one line and exit 2):
    the workers stopped and the hooks told the sweep FAILED, so that what they opened (a parent run) is not left
    RUNNING for the next sweep to call killed; the error itself then goes on to Hydra's report."""
    run.tally.close()
    for h in run.hooks:
        try:
            h.sweep_ended("FAILED", run.tally)
        except (Exception, SystemExit):  # noqa: BLE001 - the error that stopped the sweep is the one to report
            pass


def interrupted_before_any_job(run: Multirun, e: Interrupted) -> NoReturn:
    """A signal while the batch's jobs were checked and the hooks made their records: the workers stopped, the
    hooks told the sweep was KILLED (what they opened is closed), one line, exit 128+signal."""
    Interrupt.ignore()  # a second signal must not cut the closing short
    run.tally.close()
    print(f"sweep: interrupted by {e.name} before any job of the batch started", file=sys.stderr, flush=True)
    for h in run.hooks:
        h.sweep_ended("KILLED", run.tally)
    raise SystemExit(e.exit_code)
