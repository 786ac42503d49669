"""Before any job starts: will it fit in memory? A rough estimate of a job's peak memory against what this
process may still use; over it, the job is refused (ConfigError: exit 2) naming the fields that drive it.

A job of the wrong size (`problem.n_bits=100000`, `problem.n_train=100000000`, `method.hidden=10000000`)
otherwise climbs through gigabytes for minutes before the operating system kills it. The estimate counts the
big arrays every job of this project holds, in bytes, each with the config fields it grows with:

- data: x_train and x_test as float64 (n_bits each), twice (numpy draws through a temporary of the same size);
- weights: W1 (hidden x n_bits), its gradient, the initial copy and a working copy (methods with `hidden`);
- activations: the hidden layer (before and after the ReLU) over the whole train set, as accuracy computes it;
- snapshots: one weight copy per epoch for the curves (bounded by SNAPSHOT_BUDGET_FLOATS, sweep.methods.epoch_log);
- trace: with `tracker.scope=all_steps`, ~EVENTS_PER_STEP events of ~EVENT_BYTES each, for every step.

Method-specific scratch (fourier's chunks, smt's pair blocks) is bounded by the methods' own options and is
not counted. "Available" is the least of the machine's MemAvailable, the cgroup's memory.max less its usage
(a container's limit) and the address-space rlimit less this process's size.
"""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from sweep.errors import ConfigError

EVENTS_PER_STEP = 40  # buffer reads/writes of one SGD step (a few dozen in every variant)
BATCH_KEY = "hydra.launcher.batch"  # the launcher's setting: the runs of a batch, in memory at once
EVENT_BYTES = 64  # one trace event as Python keeps it (a small tuple in a list)
# the weight copies a run keeps for evaluating its curves after the clock (sweep.methods.epoch_log); past it, the
# curves are evaluated inline
SNAPSHOT_BUDGET_FLOATS = 20_000_000


@dataclass
class Term:
    what: str
    nbytes: float
    fields: tuple[str, ...]


def _get(cfg: Any, dotted: str, default: Any = None) -> Any:
    return cfg.select(dotted, default) if hasattr(cfg, "select") else default


def estimate(cfg: Any) -> list[Term]:
    """The job's big arrays (a sweep.config.view.ConfigView), largest first."""
    g = lambda k, d=0: _get(cfg, k, d)  # noqa: E731
    n_bits, n_train, n_test = int(g("problem.n_bits", 0)), int(g("problem.n_train", 0)), int(g("problem.n_test", 0))
    item = 4 if "32" in str(g("device.dtype", "float64")) else 8
    terms = [Term("data", 2 * 8 * (n_train + n_test) * n_bits, ("problem.n_bits", "problem.n_train", "problem.n_test"))]
    hidden = g("method.hidden", None)
    if isinstance(hidden, int) and hidden > 0:
        layers = int(g("method.layers", 1) or 1)
        per_copy = hidden * n_bits + (layers - 1) * hidden * hidden
        terms.append(
            Term(
                "weights",
                4 * item * per_copy,
                ("method.hidden", "problem.n_bits") + (("method.layers",) if layers > 1 else ()),
            )
        )
        terms.append(
            Term("activations", 2 * item * max(n_train, n_test) * hidden, ("problem.n_train", "method.hidden"))
        )
        epochs = int(g("method.max_epochs", 1) or 1)
        terms.append(
            Term(
                "snapshots", 8 * min(SNAPSHOT_BUDGET_FLOATS, epochs * per_copy), ("method.max_epochs", "method.hidden")
            )
        )
        if g("tracker._target_") and g("tracker.scope") == "all_steps":
            steps = epochs * math.ceil(n_train / max(int(g("method.batch_size", 1) or 1), 1))
            terms.append(
                Term(
                    "trace",
                    steps * EVENTS_PER_STEP * EVENT_BYTES,
                    ("tracker.scope", "method.max_epochs", "problem.n_train", "method.batch_size"),
                )
            )
    return sorted(terms, key=lambda t: -t.nbytes)


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


def check_fits(
    cfg: Any,
    runs: int = 1,
    available: Callable[[], Optional[float]] = available_bytes,
    default: Callable[[str], Any] = lambda dotted: None,
) -> None:
    """Raise ConfigError when the job's estimate (times `runs`: a batch's runs are in memory together) exceeds the
    available memory (`available()`), naming the fields behind the terms that make up most of it: those set above
    their defaults (`default(dotted)`: the chosen option's, sweep.config.check) first."""

    avail = available()
    if avail is None:
        return
    terms = [Term(t.what, t.nbytes * runs, t.fields) for t in estimate(cfg)]
    total = sum(t.nbytes for t in terms)
    if total <= avail:
        return
    drivers: list[str] = []
    shown, covered = [], 0.0
    for t in terms:
        if covered >= 0.9 * total:
            break
        covered += t.nbytes
        shown.append(f"{t.what} {_gb(t.nbytes)}")
        drivers += [f for f in t.fields if f not in drivers]
    # the fields set above their defaults are the ones to lower (all of the terms' fields if none is)
    raised = [f for f in drivers if _above(_get(cfg, f), default(f))] or drivers
    values = ", ".join(
        [f"{f}={_get(cfg, f)}" for f in raised if _get(cfg, f) is not None]
        + ([f"{BATCH_KEY}={runs}"] if runs > 1 else [])
    )
    who = "the job needs" if runs == 1 else f"a batch of {runs} runs of the job needs"
    raise ConfigError(
        f"{who} about {_gb(total)} of memory ({', '.join(shown)}), {_gb(avail)} is available: lower {values}"
    )
