"""Before any job starts: will it fit in memory, and can it end in time? One estimate for every method, from the
formulas its option classes declare (sweep.config.footprint: a problem's and a method's `footprint`, a method's
`least_work`); over what is available, the job is refused (ConfigError: exit 2) naming the fields that drive it.

A job of the wrong size (`problem.n_bits=100000`, `method.hidden=10000000`, `method=gpt method.n_embd=200000`,
`method=mlp_lm method.context=100000`) otherwise climbs through gigabytes for minutes before the operating system
or torch's allocator kills it; one whose least work is beyond any wait (`method=smt problem.n_bits=300
problem.k_sparse=12`, a gpt whose one step outlasts its time budget) runs until someone kills it.

Memory: the sum of the footprints, times the runs of a batch (they are in memory together), against what is
available: the least of the machine's MemAvailable, the cgroup's memory.max less its usage (a container's limit)
and the address-space rlimit less this process's size. A method's scratch is counted where its own option sizes it
(fourier's chunk, smt's pair block: either raised far enough holds every subset or pair at once).

Time: the least work (operations no run of the method can skip) at OPS_PER_S, a rate above what the device
reaches (so a refused job surely overruns), against the least of the run's time limit under the project's launcher
(`hydra.launcher.time_limit_s`, or a preset's `time_limit_s`; without one MAX_RUN_S) and the method's own
`method.time_budget_s`. Without either, nothing stops a run that never reaches its target (`method=sgd
method.max_epochs=1000000000`), so its most work (every epoch) is held to MAX_RUN_S as well.
"""

from __future__ import annotations

import math
import resource
from pathlib import Path
from typing import Any, Callable, Optional

from sweep.config.applicability import option_class
from sweep.config.footprint import OPS_PER_S, Term, device_kind
from sweep.errors import ConfigError

BATCH_KEY = "hydra.launcher.batch"  # the launcher's setting: the runs of a batch, in memory at once
MAX_RUN_S = 24 * 3600.0  # without a time limit: a run past a day is a size typed wrong (set time_limit_s to allow it)


def _get(cfg: Any, dotted: str, default: Any = None) -> Any:
    return cfg.select(dotted, default) if hasattr(cfg, "select") else default


def _declared(cfg: Any, groups: tuple[str, ...], formula: str) -> list[Term]:
    terms: list[Term] = []
    for group in groups:
        declared = getattr(option_class(cfg, group), formula, None)
        if declared is not None:
            terms += declared(cfg)
    return sorted(terms, key=lambda t: -t.amount)


def estimate(cfg: Any) -> list[Term]:
    """The job's big arrays in bytes (a sweep.config.view.ConfigView), largest first."""
    return _declared(cfg, ("problem", "method"), "footprint")


def least_work(cfg: Any) -> list[Term]:
    """The operations no run of the job can skip, largest first."""
    return _declared(cfg, ("method",), "least_work")


def most_work(cfg: Any) -> list[Term]:
    """The operations of a run that never stops early, largest first (a method without `most_work` never does)."""
    return _declared(cfg, ("method",), "most_work") or least_work(cfg)


def available_bytes() -> Optional[float]:
    """What this process may still allocate, as far as the system says (None: nobody says)."""
    limits: list[float] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    try:
        cg = Path("/sys/fs/cgroup")
        top = (cg / "memory.max").read_text().strip()
        if top != "max":
            limits.append(int(top) - int((cg / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft != resource.RLIM_INFINITY:
        try:
            pages = int(Path("/proc/self/statm").read_text().split()[0])
            limits.append(soft - pages * resource.getpagesize())
        except (OSError, ValueError):
            limits.append(soft)
    return min(limits) if limits else None


def _above(value: Any, default: Any) -> bool:
    return isinstance(value, (int, float)) and isinstance(default, (int, float)) and value > default


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def _lower(
    cfg: Any, terms: list[Term], total: float, show: Callable[[float], str], default: Callable[[str], Any]
) -> tuple[str, list[str]]:
    """The terms that make up 90% of `total`, as shown, and the fields behind them to lower: those set above their
    defaults (`default(dotted)`: the chosen option's, sweep.config.check; all of the terms' fields if none is),
    each as field=value."""
    drivers: list[str] = []
    shown, covered = [], 0.0
    for t in terms:
        if covered >= 0.9 * total:
            break
        covered += t.amount
        shown.append(f"{t.what} {show(t.amount)}")
        drivers += [f for f in t.fields if f not in drivers]
    raised = [f for f in drivers if _above(_get(cfg, f), default(f))] or drivers
    return ", ".join(shown), [f"{f}={_get(cfg, f)}" for f in raised if _get(cfg, f) is not None]


def check_fits(
    cfg: Any,
    runs: int = 1,
    available: Callable[[], Optional[float]] = available_bytes,
    default: Callable[[str], Any] = lambda dotted: None,
) -> None:
    """Raise ConfigError when the job's estimate (times `runs`: a batch's runs are in memory together) exceeds the
    available memory (`available()`), naming the fields behind the terms that make up most of it."""

    avail = available()
    if avail is None:
        return
    terms = [Term(t.what, t.amount * runs, t.fields) for t in estimate(cfg)]
    total = sum(t.amount for t in terms)
    if total <= avail:
        return
    shown, values = _lower(cfg, terms, total, _gb, default)
    values += [f"{BATCH_KEY}={runs}"] if runs > 1 else []
    who = "the job needs" if runs == 1 else f"a batch of {runs} runs of the job needs"
    raise ConfigError(
        f"{who} about {_gb(total)} of memory ({shown}), {_gb(avail)} is available: lower {', '.join(values)}"
    )


# what the launching process holds for each job of a grid before the first starts (Hydra's list of the job's
# overrides, the launcher's job and its record's plan): 450 MB at the first job of `-m problem.n_bits=8
# 'problem.seed=range(0,200000)' tracker=none` (2026-11-28, 2-core x86_64), ~100 MB of it the process itself
GRID_JOB_BYTES = 2_000


def check_grid(values: dict[str, int], available: Callable[[], Optional[float]] = available_bytes) -> None:
    """Raise ConfigError when a sweep's grid (`values`: each swept key's count of values; the jobs are their
    product) would not fit in the launching process's memory before its first job starts: Hydra lists every
    job's overrides at once (`'problem.seed=range(0,100000000)'` climbed to 9.5 GB in a minute, no job started)."""
    jobs = math.prod(values.values())
    avail = available()
    if avail is None or jobs * GRID_JOB_BYTES <= avail:
        return
    counts = " x ".join(f"{key}: {n:,} values" for key, n in values.items())
    raise ConfigError(
        f"the sweep has {jobs:,} jobs ({counts}), about {_gb(jobs * GRID_JOB_BYTES)} of the launching process's "
        f"memory before any job starts, {_gb(avail)} is available: lower the values of "
        f"{', '.join(k for k, n in values.items() if n > 1)}, or run the grid in parts"
    )


def _time_limit(cfg: Any, run_limit_s: Optional[float]) -> tuple[float, str]:
    """The least of the run's time limit (else MAX_RUN_S) and the method's own time budget, and its name."""
    limits = [(MAX_RUN_S, "a day (no time_limit_s is set)")]
    if isinstance(run_limit_s, (int, float)) and run_limit_s > 0:
        limits = [(float(run_limit_s), f"the launcher's time_limit_s={run_limit_s:g}")]
    if isinstance(budget := _get(cfg, "method.time_budget_s"), (int, float)) and budget > 0:
        limits.append((float(budget), f"method.time_budget_s={budget:g}"))
    return min(limits)


def check_time(
    cfg: Any, run_limit_s: Optional[float] = None, default: Callable[[str], Any] = lambda dotted: None
) -> None:
    """Raise ConfigError when the job's least work, at OPS_PER_S, takes longer than its time limit allows
    (`run_limit_s`: the launcher's, hydra.launcher.time_limit_s or a preset's time_limit_s); or, with no limit
    but MAX_RUN_S, when its most work does: a run that never reaches its target would run for days."""
    device = device_kind(cfg)
    limit, name = _time_limit(cfg, run_limit_s)
    # (what the work is, its operations, what a refusal adds): the least work against any limit; the most work
    # only where nothing but MAX_RUN_S stops a run that does not stop early
    checks = [("the job cannot end in time: it needs at least", least_work(cfg), "")]
    if limit >= MAX_RUN_S:
        checks.append(
            (
                "the job may never end: a run that does not stop early needs",
                most_work(cfg),
                ", or bound the run (a sweep's hydra.launcher.time_limit_s=SECONDS)",
            )
        )
    for said, terms, way_out in checks:
        total = float(sum(t.amount for t in terms))
        seconds = total / OPS_PER_S[device]
        if seconds > limit:
            shown, values = _lower(cfg, terms, total, lambda n: f"{n:.1e}", default)
            raise ConfigError(
                f"{said} {total:.1e} operations ({shown}), {_duration(seconds)} even at {OPS_PER_S[device]:.0e} a "
                f"second on {device}, more than {name}: lower {', '.join(values)}{way_out}"
            )


def _duration(seconds: float) -> str:
    if seconds >= 1e6 * 365 * 86400:
        return f"about {seconds / (365 * 86400):.0e} years"
    for unit, size in (("years", 365 * 86400.0), ("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= 2 * size:
            return f"about {seconds / size:,.0f} {unit}"
    return f"about {seconds:.0f} s"
