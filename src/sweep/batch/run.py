"""A batch's jobs solved together in one worker task, each made into its own RunResult.

Each job is checked and built as it would be alone (`sweep.job.prepare`). The jobs its method class can
vectorise (all of them, unless the class's `batchable(ctx)` says no for one) are solved by the class's
`solve_batch` when it has one, else one after the other, under one clock; the rest are solved alone, as
`sweep.job.run` does. A batched run's `wall_clock_s` (and `warmup_s`) is the batch's time over its runs: the cost
of one run when runs are solved this way; the batch's whole solve time is the run's `batch_wall_s` metric, and
its id and size are tags. A job that fails alone (its check, its solve, its evaluation) is its exception, and the
rest of its batch goes on.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

from omegaconf import DictConfig

from hydra_plugins.sweep_launcher.api import timer
from sweep.energy.meter import per_run
from sweep.job import Job, evaluate, prepare, result, solve, summarise, warm_up
from sweep.methods.base import Context, MethodBase
from sweep.methods.batched import gc_paused
from sweep.record.tags import BATCH_ID_TAG, BATCH_SIZE_TAG
from sweep.result import RunResult
from sweep.trace.trace import NULL_TRACE


@dataclass
class Member:
    i: int  # its place in the batch
    cfg: DictConfig
    config: dict[str, Any]
    job: Job


def run_batch(cfgs: Sequence[DictConfig]) -> list[RunResult | BaseException]:
    """One RunResult, or the exception that job alone raised, per job config, in order."""
    started = time.time()
    out: list[RunResult | BaseException | None] = [None] * len(cfgs)
    members: list[Member] = []
    for i, cfg in enumerate(cfgs):
        try:
            config, job = prepare(cfg)
        except Exception as e:  # noqa: BLE001 - this job's fault alone
            out[i] = e
            continue
        members.append(Member(i, cfg, config, job))
    together = [m for m in members if batchable(m.job)]
    for m in members:
        if m not in together:
            out[m.i] = _alone(m)
    if len(together) == 1:
        out[together[0].i] = _alone(together[0])
    elif together:
        with gc_paused():  # thousands of runs' results made at once (methods/batched.py)
            for m, r in zip(together, solve_together(together, started)):
                out[m.i] = r
    return out  # type: ignore[return-value]


def batchable(job: Job) -> bool:
    return type(job.method).batchable(job.ctx)


def _alone(m: Member) -> RunResult | BaseException:
    """A run solved alone: its own start and end, as a run of its own task has (the task's start and the end of its
    last run made each of its runs span them all, which the next sweep's estimate read as each run's seconds)."""
    started = time.time()
    try:
        solved = solve(m.job, m.cfg.device, place=m.i)
        report, curves = summarise(m.job, solved)
        r = result(m.cfg, m.config, m.job, solved, report, curves, started)
    except Exception as e:  # noqa: BLE001 - this job's fault alone
        return e
    r.end_time = time.time()
    return r


def _solve(members: list[Member], ctxs: list[Context], timed: bool = False) -> list[Any]:
    """The class's solve_batch, or each method's own solve one after the other: an outcome or exception each.
    `timed`: the solve the runs are timed on, which the launcher's time limit (if any) covers run by run."""
    cls = type(members[0].job.method)
    methods = [m.job.method for m in members]
    if hasattr(cls, "solve_batch"):
        try:
            return list(cls.solve_batch(methods, ctxs))
        except Exception as e:  # noqa: BLE001 - the batched solve as a whole failed: every run reports it
            return [e] * len(members)
    outcomes: list[Any] = []
    for m, method, ctx in zip(members, methods, ctxs):
        if timed:
            timer.begin(m.i)
        try:
            outcomes.append(method.solve(ctx))
        except Exception as e:  # noqa: BLE001 - this run's fault alone
            outcomes.append(e)
    return outcomes


def meter_batch(members: list[Member]) -> tuple[dict[str, float], dict[str, str]] | None:
    """The batch's measured energy, each run's share (energy / runs, as its wall_clock_s): the batch solved
    again untraced while the counter runs. None where the tracker measures nothing."""
    tracker = members[0].job.tracker
    if tracker is None:
        return None
    untraced = [dataclasses.replace(m.job.ctx, trace=NULL_TRACE) for m in members]
    metrics, tags = tracker.measure(
        lambda: _solve(members, untraced), members[0].cfg.device, members[0].job.backend.clock
    )
    return per_run(metrics, len(members)), tags


def solve_together(members: list[Member], started: float) -> list[RunResult | BaseException]:
    """The members (one method class, one backend) solved under one clock, after an untraced warm-up where the
    backend needs one (as a job alone); then each run's figures, evaluated and summarised as alone."""
    backend = members[0].job.backend
    n = len(members)
    warmup = None
    if backend.needs_warmup:
        t0 = backend.clock()
        if type(members[0].job.method).warmup is not MethodBase.warmup:  # the method's own warm-up, run by run
            for m in members:
                warm_up(m.job.method, m.job.ctx)
        else:
            _solve(members, [dataclasses.replace(m.job.ctx, trace=NULL_TRACE) for m in members])
        warmup = backend.clock() - t0
    t0 = backend.clock()
    outcomes = _solve(members, [m.job.ctx for m in members], timed=True)
    wall = backend.clock() - t0
    timer.end()  # what follows (each run's figures) is the project's, not the runs': no time limit
    metered = meter_batch(members)
    bid = uuid.uuid4().hex[:12]
    out: list[RunResult | BaseException] = []
    for m, outcome in zip(members, outcomes):
        if isinstance(outcome, BaseException):
            out.append(outcome)
            continue
        try:
            solved = evaluate(
                m.job, outcome, wall / n, warmup / n if warmup is not None else None, m.cfg.device, metered
            )
            report, curves = summarise(m.job, solved)
            r = result(m.cfg, m.config, m.job, solved, report, curves, started)
        except Exception as e:  # noqa: BLE001 - this run's fault alone
            out.append(e)
            continue
        if "wall_clock_s" not in outcome.extra:  # (a user's solver times its own call: no share to mark)
            r.metrics["batch_wall_s"] = wall
        r.tags[BATCH_ID_TAG], r.tags[BATCH_SIZE_TAG] = bid, str(n)
        out.append(r)
    return out
