"""One job: config -> check -> build -> solve -> summarise -> RunResult. Pure with respect to the store: it never
touches MLflow, so any launcher (in-process, worker process, Modal container) runs it and ships the result back."""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import json
import time
import warnings
from dataclasses import dataclass
from typing import Any, Optional

import yaml
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.sweep_launcher.api import timer
from sweep.backend import KNOBS, Backend
from sweep.challenge.scorer import this_scorer
from sweep.config.check import check_job
from sweep.config.prices import cost_usd, device_price_per_hour
from sweep.config.schema import JOB_GROUPS
from sweep.config.view import job_config
from sweep.energy.meter import measure_solve
from sweep.methods.base import Context
from sweep.record.tags import SCORER_TAG, TRACE_SOURCE_TAG, TRACKER_VERSION_TAG
from sweep.result import RunResult
from sweep.trace import stored
from sweep.trace.report import TrackerReport
from sweep.trace.scope import Scope
from sweep.trace.source import METHOD, Source, resolve
from sweep.trace.trace import NULL_TRACE, Trace

# a run that diverges (method.lr=1e6) is a result like any other, recorded with its nan losses and chance accuracy:
# numpy's floating-point warnings, a source line each (36 lines of forward_forward's, 10 of sgd's), said nothing its
# figures do not (a user's solver runs in a sandbox process of its own, its warnings its own)
warnings.filterwarnings("ignore", r"(overflow|invalid value|divide by zero) encountered", RuntimeWarning)


def build(node: DictConfig | dict[str, Any]) -> Any:
    """An option's object from its `_target_` (its config node, or the node resolved to plain data). The options
    are flat (a `_target_` and plain fields), so this calls the class with the resolved fields, without
    instantiate's deep copy of the node (~1 ms of a sweep job's ~4 ms set-up); anything richer (`_partial_`,
    nested `_target_`s) goes to Hydra's instantiate."""
    # a copy: what the object is given is its own (the job's resolved config is recorded as its params)
    fields = copy.deepcopy(node) if isinstance(node, dict) else OmegaConf.to_container(node, resolve=True)
    assert isinstance(fields, dict)
    target = fields.pop("_target_")
    if any(str(k).startswith("_") for k in fields) or any(isinstance(v, (dict, list)) for v in fields.values()):
        return instantiate(node)
    try:
        cls = get_class(target)
    except Exception:  # noqa: BLE001 - a function target, or one that fails to import: Hydra's path and errors
        return instantiate(node)
    return cls(**fields)


def make_backend(device: DictConfig | dict[str, Any]) -> Backend:
    return Backend(name=device["backend"], device=device["torch_device"], **{k: device[k] for k in KNOBS})


def config_yaml(cfg: DictConfig) -> str:
    """The job config as YAML through libyaml (OmegaConf.to_yaml's pure-Python emitter costs ~3 ms a job)."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(
        OmegaConf.to_container(cfg, resolve=False, enum_to_str=True),
        Dumper=dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
    )


def table_csv(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


@dataclass
class Job:
    """A job's built parts: the problem's data, the array backend, the method and its context, the tracker."""

    data: Any
    backend: Backend
    method: Any
    ctx: Context
    tracker: Any  # None: tracker=none


@dataclass
class Solved:
    """What solving produced: the method's outcome, the timed solve's seconds, a warm-up's, measured energy."""

    outcome: Any
    wall_s: float
    warmup_s: float | None
    measured: dict[str, float]
    meter_tags: dict[str, str]


def build_job(cfg: DictConfig, config: dict[str, Any] | None = None) -> Job:
    """The job's parts, built from its resolved config (`config`: `job_config(cfg)`, where the caller has it: the
    config is resolved once a job, not again for each part)."""
    config = job_config(cfg) if config is None else config
    problem = build(config["problem"])
    data = problem.generate()
    backend = make_backend(config["device"])
    tracker = build(config["tracker"]) if config["tracker"].get("_target_") else None
    trace = Trace() if tracker is not None else NULL_TRACE
    method = build(config["method"])
    ctx = Context(
        problem=problem,
        data=data,
        backend=backend,
        trace=trace,
        scope=Scope(config["tracker"]["scope"]),
        variant=build(config["variant"]),
        source=resolve(config["tracker"].get("source", METHOD), method.trace_source),
    )
    return Job(data, backend, method, ctx, tracker)


def solve(job: Job, device: DictConfig, place: int = 0) -> Solved:
    """The timed solve (after an untraced warm-up where the backend needs one), then the measured energy. A time
    limit on the job (the launcher's) covers the timed solve: `place` is the job's place in its worker's task."""
    backend, method, ctx = job.backend, job.method, job.ctx
    warmup = None
    if backend.needs_warmup:
        # Honest timing (seed 004): a first, untraced solve pays lazy init and torch.compile; it is reported
        # as warmup_s, and the timed solve below is the steady state.
        t0 = backend.clock()
        warm_up(method, ctx)
        warmup = backend.clock() - t0
    timer.begin(place)
    t0 = backend.clock()
    outcome = method.solve(ctx)
    wall = backend.clock() - t0
    timer.end()
    return evaluate(job, outcome, wall, warmup, device)


def warm_up(method: Any, ctx: Context) -> None:
    """The untraced warm-up before a timed solve: the method's own (`warmup(ctx)`: a few steps of a long training),
    else a whole solve."""
    untraced = dataclasses.replace(ctx, trace=NULL_TRACE)
    method.warmup(untraced)


def evaluate(
    job: Job,
    outcome: Any,
    wall_s: float,
    warmup_s: float | None,
    device: DictConfig,
    metered: tuple[dict[str, float], dict[str, str]] | None = None,
) -> Solved:
    """After the clock: the outcome's figures, and the tracker's measured energy (untimed repeats of the solve;
    ``metered``: measured already, a batch's share)."""
    outcome.finalize()  # evaluating the answer (accuracy, curves) is not learning it: after the clock
    measured, meter_tags = metered if metered is not None else measure_solve(job.tracker, job.method, job.ctx, device)
    return Solved(outcome, wall_s, warmup_s, measured, meter_tags)


def summarise(job: Job, solved: Solved) -> tuple[TrackerReport, dict[str, list[float]]]:
    """The tracker's report of the trace, and the run's curves (all_steps: the tracker's figures per epoch)."""
    outcome, tracker = solved.outcome, job.tracker
    if tracker is None:
        return TrackerReport(), dict(outcome.curves)
    pieces, steps = _pieces(outcome)
    report, per_epoch = tracker.figures(job.ctx.trace, list(pieces.values()), steps)
    return report, {**outcome.curves, **per_epoch}


def _pieces(outcome: Any) -> tuple[dict[str, Trace], int]:
    """The trace's pieces and, for a run measured by one traced step, its steps (0: the pieces are epochs)."""
    if outcome.step_traces:  # one traced step stands for each of the run's steps
        return outcome.step_traces, outcome.steps
    return outcome.traces, 0


def result(
    cfg: DictConfig,
    config: dict[str, Any],
    job: Job,
    solved: Solved,
    report: TrackerReport,
    curves: dict[str, list[float]],
    started: float,
) -> RunResult:
    """The RunResult: metrics, curves, tags and artifacts, plain data for the recorder."""
    outcome, data = solved.outcome, job.data
    metrics: dict[str, float] = {
        "accuracy": float(outcome.accuracy),
        "train_accuracy": float(outcome.train_accuracy),
        "epochs": float(outcome.epochs),
        "wall_clock_s": solved.wall_s,
        **({"warmup_s": solved.warmup_s} if solved.warmup_s is not None else {}),
        **{k: float(v) for k, v in outcome.extra.items()},
        **({"tokens_per_s": outcome.extra["tokens"] / solved.wall_s} if "tokens" in outcome.extra else {}),
        **{k: float(v) for k, v in report.metrics.items()},
        **solved.measured,
    }
    # priced from the clock the run records, which a method may set itself (a user's solver: its call alone, not
    # its sandbox's start), so that cost_usd = wall_clock_s x price / 3600 holds on every run
    metrics["cost_usd"] = cost_usd(metrics["wall_clock_s"], device_price_per_hour(cfg.device))
    if job.tracker is not None and job.ctx.source is Source.AUTO:
        metrics["escaped"] = float(job.ctx.trace.escaped)  # what the automatic trace saw leave the arrays
    secret_ok = None
    if outcome.secret_found is not None:
        secret_ok = tuple(outcome.secret_found) == tuple(data.secret)
        metrics["secret_correct"] = float(secret_ok)
    tags = {g: str(cfg[g].name) for g in JOB_GROUPS}
    tags.update(solved.meter_tags)
    tags.update(outcome.tags)
    tags[SCORER_TAG] = this_scorer()  # which scorer measured it: a leaderboard ranks one scorer's runs
    if data.secret:
        tags["secret"] = ",".join(map(str, data.secret))
    if job.tracker is not None:
        tags[TRACE_SOURCE_TAG] = job.ctx.source.value  # tracker.source=method: which one the method's is
    if outcome.secret_found is not None:
        tags["secret_found"] = ",".join(map(str, outcome.secret_found))
    artifacts = {"config.yaml": config_yaml(cfg), **outcome.artifacts}
    if job.tracker is not None:
        tags[TRACKER_VERSION_TAG + job.tracker.name] = job.tracker.version
        # the trace itself, so that a tracker defined later scores this run without solving it again
        artifacts[stored.ARTIFACT] = stored.dumps(job.ctx.trace, *_pieces(outcome))
    if report.table:
        artifacts["tracker_buffers.csv"] = table_csv(report.table)
    artifacts["outcome.json"] = json.dumps(
        {
            "secret": list(data.secret),
            "secret_found": outcome.secret_found,
            "secret_correct": secret_ok,
            "metrics": metrics,
        },
        indent=1,
    )
    return RunResult(config=config, metrics=metrics, curves=curves, tags=tags, artifacts=artifacts, start_time=started)


def prepare(cfg: DictConfig) -> tuple[dict[str, Any], Job]:
    """The job's resolved config, checked where it runs (ConfigError), and its built parts."""
    config = job_config(cfg)
    check_job(config, runs_here=True, time_limit_s=run_time_limit(cfg))
    return config, build_job(cfg, config)


def run_time_limit(cfg: DictConfig) -> Optional[float]:
    """The time limit the launcher holds this run to, as its plan read it (sweep.launch.hooks): the project's
    launcher's `hydra.launcher.time_limit_s`, else a preset's `time_limit_s`; None under a launcher without one."""
    from hydra.core.hydra_config import HydraConfig  # noqa: PLC0415 - set in a Hydra job only

    if not HydraConfig.initialized():
        return None
    launcher = HydraConfig.get().launcher
    if "time_limit_s" not in launcher:
        return None
    value = launcher.time_limit_s
    return value if value is not None else OmegaConf.select(cfg, "time_limit_s", default=None)


def run(cfg: DictConfig) -> RunResult:
    """Check, build, solve, summarise the trace; return everything the recorder needs."""
    started = time.time()
    config, job = prepare(cfg)
    solved = solve(job, cfg.device)
    report, curves = summarise(job, solved)
    return result(cfg, config, job, solved, report, curves, started)
