"""One batch of the sweeper, in the launching process: every job checked before any starts, then the rest
handed to the dispatcher, both as streams.

A job is held small (`_jobs.Job`: index, overrides, name, placement, the app's notes). The check is one pass
over the batch: each job composed, placed, shown to the app's hooks (`plan`'s stream), then its config dropped.
Jobs that differ only in plain values are composed on one working config per shape, with their task part resolved
as plain data (`FastComposer.take_planned`, `PlannedJob.resolved`): tens of µs a job, whatever the grid's size.
The dispatcher composes each job again just before it goes to a worker. Memory before the first job is thus
flat in the grid's size, whatever the grid.

A `Multirun` lives for all of the sweeper's batches: the app's hooks (taken once), the tally they are told
at the end, and the local worker pool. Only this process talks to the hooks (and so writes the app's store):
workers and Modal containers send back a `_core.Reply`.
"""

from __future__ import annotations

import gc
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Hashable, Iterator, NoReturn, Optional, Sequence

from hydra.core.utils import JobReturn, configure_log, setup_globals
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.sweep_launcher import hooks as hooks_mod
from hydra_plugins.sweep_launcher._batches import batched
from hydra_plugins.sweep_launcher._jobs import Job, compose, composer, job_id, skipped_return
from hydra_plugins.sweep_launcher._pool import Pool
from hydra_plugins.sweep_launcher._signals import Interrupt, Interrupted, as_interrupted, check_pending, hold
from hydra_plugins.sweep_launcher.backends import backends, modal_missing
from hydra_plugins.sweep_launcher.commands import command
from hydra_plugins.sweep_launcher.hooks import LaunchHooks, Refused, Tally
from hydra_plugins.sweep_launcher.naming import Namer


def at_least_one(key: str, requested: Any, meaning: str) -> int:
    """A launcher setting that must be an integer >= 1: anything else is refused in one line naming `key` and what
    is allowed, exit 2, before any worker or job starts."""
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        print(f"sweep: {key}={requested!r} is not allowed: expected {meaning}", file=sys.stderr, flush=True)
        raise SystemExit(2)
    return requested


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


def batch_size(requested: Any, key: str = "hydra.launcher.batch") -> int:
    """The setting `key` (hydra.launcher.batch, or the app's own that its hooks name)."""
    meaning = "an integer >= 1 (the most jobs solved together in one task; 1: each job alone)"
    return at_least_one(key, requested, meaning)


def time_limit(requested: Any, key: str = "hydra.launcher.time_limit_s") -> Optional[float]:
    """The setting `key` (hydra.launcher.time_limit_s, or the app's own that its hooks name): seconds > 0, or null."""
    if requested is None:
        return None
    if isinstance(requested, bool) or not isinstance(requested, (int, float)) or not 0 < requested < float("inf"):
        print(
            f"sweep: {key}={requested!r} is not allowed: expected a number of seconds > 0 (the most a job may run), "
            "or null (no limit)",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(2)
    return float(requested)


class Multirun:
    def __init__(self, launcher: Any) -> None:
        cfg: DictConfig = launcher.config
        self.hooks: list[LaunchHooks] = hooks_mod.take()
        self.batch = self.batch_setting(launcher.batch, cfg)
        self.time_limit = self.limit_setting(launcher.time_limit_s, cfg)
        self.tally = Tally()
        env_offline = os.environ.get("SWEEP_MODAL_OFFLINE", "").lower() in ("1", "true", "yes")
        self.offline = bool(launcher.modal.get("offline", False)) or env_offline
        self.n_workers = worker_count(launcher.n_workers, local=launcher.route != "modal" or self.offline)
        self.tally.launcher = {
            "name": str(OmegaConf.select(cfg, "hydra.runtime.choices.hydra/launcher", default=launcher.route)),
            "route": launcher.route,
            "n_workers": self.n_workers,
            "force": launcher.force,
            "batch": self.batch,
            "modal.offline": self.offline,
            "time_limit_s": self.time_limit,
        }
        self.tally.closers.append(self.close_pool)
        for h in self.hooks:
            h.driven, h.tally = True, self.tally  # driven travels to the workers with Hydra's context
        self.pool: Optional[Pool] = None
        self.namer = Namer.for_multirun(cfg.hydra)
        self.backends = backends(launcher.modal, launcher.backends)  # where jobs run but here: chosen once

    def close_pool(self, kill: bool = False) -> None:
        if self.pool is not None:
            self.pool.close(kill=kill)
            self.pool = None

    def batch_setting(self, requested: Any, cfg: DictConfig) -> int:
        """hydra.launcher.batch; where it is null, what the hooks say (the app's own setting), else 1."""
        if requested is not None:
            return batch_size(requested)
        for h in self.hooks:
            said = h.batch_size(cfg)
            if said is not None:
                return batch_size(said[1], said[0])
        return 1

    def limit_setting(self, requested: Any, cfg: DictConfig) -> Optional[float]:
        """hydra.launcher.time_limit_s; where it is null, what the hooks say (the app's own setting), else None."""
        if requested is not None:
            return time_limit(requested)
        for h in self.hooks:
            said = h.time_limit(cfg)
            if said is not None:
                return time_limit(said[1], said[0])
        return None

    def batch_key(self, job: Job) -> Optional[Hashable]:
        """What a job may share a batch under (the first of the hooks' keys, where it runs: one local worker or one
        Modal container of one GPU type); None: it runs alone."""
        for h in self.hooks:
            k = h.batch_key(job)
            if k is not None:
                return (job.where, job.gpu, k)
        return None

    def placement(self, job: Job, route: str) -> tuple[str, Optional[str]]:
        where, gpu = "local", None
        for h in self.hooks:
            said = h.placement(job)
            if said is not None:
                where, gpu = said
                break
        return (where if route == "device" else route), gpu


class Stream:
    """The batch's jobs one at a time, each composed while it is the current one. The first pass also places
    each job and, at the first job placed on Modal, looks for Modal's token. Without one, the jobs placed on Modal
    are left out when others run here (`Job.left_out`: one line says which, and how to run them), and the batch
    is refused when none would: at the end of the pass, before the hooks' plan is over (the app opens its records
    once it has seen every job)."""

    def __init__(self, launcher: Any, run: "Multirun", jobs: list[Job]) -> None:
        self.launcher, self.run, self.jobs = launcher, run, jobs
        self.placed = False
        self.no_token: Optional[bool] = None  # unknown until a job is placed on Modal

    def __iter__(self) -> Iterator[Job]:
        place = not self.placed
        master = self.launcher.config
        take_planned = getattr(self.launcher.hydra_context.config_loader, "take_planned", None)  # FastComposer's
        name = str(master.hydra.job.name)
        instead: Optional[str] = None  # what the app says runs the first left-out job here instead
        for job in self.jobs:
            planned = take_planned(master, job.overrides, job_id(name, job.idx), job.idx) if take_planned else None
            if planned is not None:
                job.cfg, job.template, job.resolved = planned
            else:
                job.cfg, job.template = compose(self.launcher, job.overrides, job.idx, in_turn=True)
            if place:
                where, gpu = self.run.placement(job, self.launcher.route)
                job.where, job.gpu = where, (gpu if where != "local" else None)
                if where == "modal" and self.no_token is None:
                    self.no_token = modal_without_token(self.run)
                if where == "modal" and self.no_token:
                    job.left_out = True
                    if instead is None:
                        instead = next((m for h in self.run.hooks if (m := h.instead_of_modal(job))), "")
            try:
                yield job
            finally:
                job.cfg = job.resolved = None
        if place and self.jobs and all(j.left_out for j in self.jobs):
            refuse_without_token(self.run, self.jobs, instead or "")
        self.placed = True


def drain(it: Iterator[Job]) -> None:
    """The jobs a hook did not draw (it stopped early): placed all the same."""
    for _ in it:
        pass


def modal_without_token(run: Multirun) -> bool:
    """Whether jobs placed on Modal cannot go there for want of Modal's token (offline mode needs none; without
    the modal package each such job fails with how to install it)."""

    if run.offline or modal_missing():
        return False
    from hydra_plugins.sweep_launcher import _modal_app  # noqa: PLC0415 - Modal: the [modal] extra, seconds to import

    return _modal_app.token_problem() is not None


def refuse_without_token(run: Multirun, jobs: list[Job], instead: str) -> None:
    """Every job is placed on Modal, which has no token: one line, exit 2, before any job starts. What runs them
    on this machine comes first (`instead`: the app's word, else offline mode), then how to set Modal up."""
    from hydra_plugins.sweep_launcher import _modal_app  # noqa: PLC0415 - Modal: the [modal] extra, seconds to import

    here = instead or "run them on this machine's GPU without the network: hydra.launcher.modal.offline=true"
    run.tally.close()  # nothing runs: no worker may stay
    print(
        f"sweep: {len(jobs)} job(s) placed on Modal, which has no API token on this machine: {here}; or set Modal "
        f"up ({_modal_app.token_setup()}) and run this command again",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(2)


def left_out_arms(jobs: list[Job]) -> str:
    """Which jobs were left out: by the overrides only they have (`device=cuda`; a preset's cuda arms)."""
    kept = {o for j in jobs if not j.left_out for o in j.overrides}
    arms: dict[str, list[str]] = {}
    for j in jobs:
        for o in j.overrides if j.left_out else ():
            key, _, value = o.partition("=")
            if o not in kept and value not in arms.setdefault(key, []):
                arms[key].append(value)
    return " ".join(f"{k}={','.join(v)}" for k, v in arms.items() if v) or "placed on Modal"


def plan(launcher: Any, run: Multirun, jobs: list[Job]) -> dict[int, Optional[str]]:
    """Every job checked before any starts, as a stream: each hook's `plan` over the batch (exit 2 on a refused
    job, or the code the hooks give), and the jobs they skip: index -> None (already done) or why. Without hooks,
    one pass places the jobs."""
    stream = Stream(launcher, run, jobs)
    skip: dict[int, Optional[str]] = {}
    try:
        for h in run.hooks:
            it = iter(stream)
            said = h.plan(it)
            skip.update(said if isinstance(said, dict) else dict.fromkeys(said))
            drain(it)
        if not stream.placed:
            drain(iter(stream))
    except Refused as e:
        check_pending()  # a signal that broke what the hooks were doing (their store's making) is what stops it
        run.tally.close()  # nothing runs: no worker may stay
        print(str(e), file=sys.stderr, flush=True)
        raise SystemExit(e.code) from None
    return skip


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
    try:
        if dispatcher is not None:
            returns.update(dispatcher.run())
    finally:
        if not run.hooks:  # no hooks will say when the sweep ends (an app of its own, Hydra's tests): the workers
            run.close_pool()  # go with each launch (a fork starts them again in milliseconds), not with the process
    if run.hooks:  # from the last job to the sweep's end (the hooks close it: `LaunchHooks`), a signal waits
        hold()
    return [returns[j.idx] for j in jobs]


def prepare(
    launcher: Any, run: Multirun, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, returns: dict
) -> tuple[list[Job], Any]:
    """The batch's jobs, every one checked (`plan`), the skipped ones' returns put in `returns`, and the dispatcher
    of the rest (None: nothing to run)."""
    from hydra_plugins.sweep_launcher._dispatch import Dispatcher  # noqa: PLC0415 - the dispatcher (rich, pipes): on the first launch, not at plugin scan

    cfg: DictConfig = launcher.config
    if launcher.route != "modal" or run.offline:  # start the workers now: they import while this process checks
        if run.offline and not modal_missing():  # import modal once here, before the fork, not once per worker
            import hydra_plugins.sweep_launcher._modal_app  # noqa: F401, PLC0415 - start-up: see the comment
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
    skip = plan(launcher, run, jobs)
    check_pending()  # a signal whose exception a callback swallowed while the hooks made their records
    done = {i for i, why in skip.items() if why is None}
    if done and not launcher.force:
        run.tally.skipped += len(done)
        print(
            f"sweep: skipping {len(done)} job(s) already done ({hooks_mod.rerun_hint(run.tally.force_key)})", flush=True
        )
    else:
        done = set()
    others = {i: why for i, why in skip.items() if why is not None}
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
        run.tally.left_out_note = f"{left_out_arms(jobs)}: Modal has no API token here"
        print(
            f"sweep: leaving out {len(left)} job(s), {run.tally.left_out_note}; to run them, give Modal a token "
            f"(`{command('modal', 'token', 'new')}`) and run this command again (what is done is skipped)",
            flush=True,
        )
    todo = [j for j in jobs if j.idx not in returns]
    if run.batch > 1:
        todo = batched(todo, run.batch_key, run.batch, run.n_workers)
    if not todo:
        return jobs, None
    expected: dict[int, float] = {}
    for h in run.hooks:  # what the app expects of each job (its earlier runs' seconds), for the ETA
        expected.update(h.estimate(todo) or {})
    return jobs, Dispatcher(
        launcher, todo, run.pool, run.hooks, run.tally, run.offline, run.time_limit, run.backends, expected
    )


def interrupted_before_any_job(run: Multirun, e: Interrupted) -> NoReturn:
    """A signal while the batch's jobs were checked and the hooks made their records: the workers stopped, the
    hooks told the sweep was KILLED (what they opened is closed), one line, exit 128+signal."""
    Interrupt.ignore()  # a second signal must not cut the closing short
    run.tally.close()
    print(f"sweep: interrupted by {e.name} before any job of the batch started", file=sys.stderr, flush=True)
    for h in run.hooks:
        h.sweep_ended("KILLED", run.tally)
    raise SystemExit(e.exit_code)
