"""One job: config -> check -> build -> solve -> summarise -> RunResult. Pure with respect to the store: it never
touches MLflow, so any launcher (in-process, worker process, Modal container) runs it and ships the result back."""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import json
import time
from dataclasses import dataclass
from typing import Any

import yaml
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from sweep.backend import KNOBS, Backend
from sweep.config.check import check_job
from sweep.config.prices import cost_usd, device_price_per_hour
from sweep.config.schema import JOB_GROUPS
from sweep.energy.meter import measure_solve
from sweep.errors import ConfigError
from sweep.methods.base import Context
from sweep.result import RunResult
from sweep.trace.scope import Scope
from sweep.trace.trace import NULL_TRACE, Trace
from sweep.trackers.base import TrackerReport


def job_config(cfg: "DictConfig | dict[str, Any]") -> dict[str, Any]:
    """The resolved config that defines a job's result (what resume and params compare). `cfg`: the composed
    config, or its top-level keys already resolved (a key still a DictConfig is resolved here).

    `extra` holds user keys such as a preset's `extra.repeat`: they are part of a job's identity, so
    repeats of one config are distinct jobs (and distinct params) rather than one resumed run."""
    try:
        out = {k: _plain(cfg[k]) for k in JOB_GROUPS}
        extra = cfg.get("extra")
        if extra:
            out["extra"] = _plain(extra)
    except InterpolationResolutionError as e:  # `${oops}`, a resolver that fails: bad input, one line
        raise ConfigError(unresolved(cfg, e)) from None
    return out


def unresolved(cfg: "DictConfig | dict[str, Any]", e: InterpolationResolutionError) -> str:
    """A value whose interpolation cannot be resolved, in a config error's words: the key, its value as written,
    OmegaConf's reason (its first line)."""
    key = str(getattr(e, "full_key", "") or "")
    reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if not key:
        return f"an interpolation cannot be resolved: {reason}"
    written: Any = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, DictConfig) else cfg
    for part in key.split("."):
        written = written.get(part, "?") if isinstance(written, dict) else "?"
    return f"{key}={written} cannot be resolved: {reason}"


def _plain(node: Any) -> Any:
    return node if isinstance(node, (dict, list)) else OmegaConf.to_container(node, resolve=True)


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
    ctx = Context(
        problem=problem,
        data=data,
        backend=backend,
        trace=trace,
        scope=Scope(config["tracker"]["scope"]),
        variant=build(config["variant"]),
    )
    return Job(data, backend, build(config["method"]), ctx, tracker)


def solve(job: Job, device: DictConfig) -> Solved:
    """The timed solve (after an untraced warm-up where the backend needs one), then the measured energy."""
    backend, method, ctx = job.backend, job.method, job.ctx
    warmup = None
    if backend.needs_warmup:
        # Honest timing (seed 004): a first, untraced solve pays lazy init and torch.compile; it is reported
        # as warmup_s, and the timed solve below is the steady state.
        t0 = backend.clock()
        method.solve(dataclasses.replace(ctx, trace=NULL_TRACE))
        warmup = backend.clock() - t0
    t0 = backend.clock()
    outcome = method.solve(ctx)
    wall = backend.clock() - t0
    return evaluate(job, outcome, wall, warmup, device)


def evaluate(job: Job, outcome: Any, wall_s: float, warmup_s: float | None, device: DictConfig) -> Solved:
    """After the clock: the outcome's figures, and the tracker's measured energy (untimed repeats of the solve)."""
    outcome.finalize()  # evaluating the answer (accuracy, curves) is not learning it: after the clock
    measured, meter_tags = measure_solve(job.tracker, job.method, job.ctx, device)
    return Solved(outcome, wall_s, warmup_s, measured, meter_tags)


def summarise(job: Job, solved: Solved) -> tuple[TrackerReport, dict[str, list[float]]]:
    """The tracker's report of the trace, and the run's curves (all_steps: the tracker's figures per epoch)."""
    outcome, tracker = solved.outcome, job.tracker
    report = tracker.summarize(job.ctx.trace) if tracker is not None else TrackerReport()
    curves = dict(outcome.curves)
    if tracker is not None and outcome.traces:
        per_epoch = tracker.summarize_each(list(outcome.traces.values()))  # batched: one pass, not one per epoch
        for key in per_epoch[0] if per_epoch else []:
            curves[f"{key}_per_epoch"] = [m[key] for m in per_epoch]
    return report, curves


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
        "cost_usd": cost_usd(solved.wall_s, device_price_per_hour(cfg.device)),
        **({"warmup_s": solved.warmup_s} if solved.warmup_s is not None else {}),
        **{k: float(v) for k, v in outcome.extra.items()},
        **{k: float(v) for k, v in report.metrics.items()},
        **solved.measured,
    }
    secret_ok = None
    if outcome.secret_found is not None:
        secret_ok = tuple(outcome.secret_found) == tuple(data.secret)
        metrics["secret_correct"] = float(secret_ok)
    tags = {g: str(cfg[g].name) for g in JOB_GROUPS}
    tags.update(solved.meter_tags)
    tags["secret"] = ",".join(map(str, data.secret))
    if outcome.secret_found is not None:
        tags["secret_found"] = ",".join(map(str, outcome.secret_found))
    artifacts = {"config.yaml": config_yaml(cfg)}
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
    check_job(config, runs_here=True)
    return config, build_job(cfg, config)


def run(cfg: DictConfig) -> RunResult:
    """Check, build, solve, summarise the trace; return everything the recorder needs."""
    started = time.time()
    config, job = prepare(cfg)
    solved = solve(job, cfg.device)
    report, curves = summarise(job, solved)
    return result(cfg, config, job, solved, report, curves, started)
