"""method=solver: a user's own `solve(x, y, n_bits, k_sparse)`, measured as the project's methods are, run in a
sandbox of its own (sweep.sandbox) and judged from outside it.

The group's challenge's interface: the function gets the training rows (x: (n_train, n_bits) of +-1.0, y: their
+-1.0 labels) and the sizes, nothing else (not the secret, not the test set, not the config, not the store), and
returns the secret's indices. It runs in a fresh process (sweep.sandbox: bubblewrap where it runs), which gets
x, y and the sizes over a pipe and sends back the answer and its trace; `method.path` names the function
(sweep.methods.solver_path: loaded and checked in a sandbox before any job starts, within `method.load_limit_s`). The
parent judges: the answer's form and accuracy (on the test set, which never leaves the parent), the clock
(`wall_clock_s`: the parent's, of the call alone) and `method.time_limit_s` (past it the sandbox is killed and the
run FAILED). A process that raises, exits, crashes, runs out of `method.memory_mb` or sends garbage fails the run
with that reason, one line.

It runs under the automatic numpy trace (`tracker.source=auto`, the only source it has: sweep.trace.auto's
NumpyTracer), in the sandbox (sweep.challenge.traced): every numpy operation on the data, or on what is made from
it, is a read and a write of its buffers; a value taken out of an array into Python (`.item()`, `float()`,
`int()`, `tolist()`, iterating, `tobytes()`) is a read too, and counted (metric `escaped`). What Python then does
with such values is out of the trace's sight, so a run that takes more than `method.max_escaped` of them (by
default n_bits) is flagged as work outside numpy (metric `outside_numpy` = 1), not ranked as cheap. The trace that
comes back is checked here (`check_trace`): a trace that is not one fails the run; one that never read x or y,
or that the kernel's counters show a process beside, is flagged `untraced` = 1. The kernel's counters of the
sandbox during the call (sweep.sandbox.counters) are recorded beside it: `sandbox_cpu_s`,
`sandbox_minor_faults`, `sandbox_peak_rss_mb`. The whole solve is one traced step, whatever `tracker.scope`; with
tracker=none nothing is traced, and nothing counted.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import numpy as np

from sweep.config.fields import Rule, nonneg_int
from sweep.errors import ConfigError
from sweep.methods import solver_path as load
from sweep.methods.base import SEEDS_ONLY, Context, MethodBase, Outcome, subset_outcome
from sweep.sandbox import EntrantFailed, Limits, target
from sweep.sandbox.target import find
from sweep.trace import stored
from sweep.trace.source import METHOD, Source
from sweep.trace.trace import Trace

SOURCE_ARTIFACT = "solver.py"  # the solver's source, as the run measured it
SOLVER_SHA_TAG = "sweep.solver_sha"  # ... and its sha256 (16 hex digits), a tag on the run
SANDBOX_TAG = "sweep.sandbox"  # how its sandbox isolated it: bwrap | process (the fallback)


def _positive(v: Any, c: Any = None) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


@dataclass
class Solver(MethodBase):
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity",)  # the challenge's problem: labels are parities
    trace_source: ClassVar[str] = Source.AUTO.value  # its only source: a user's code has no hand-placed trace
    vectorised: ClassVar[tuple[str, ...]] = SEEDS_ONLY  # batched as several runs in one task
    field_rules: ClassVar[tuple[Rule, ...]] = (
        target.rule("method.path", "my_solver.py:solve"),
        Rule("method.max_escaped", "an integer >= 0, or null (n_bits)", lambda v, c: v is None or nonneg_int(v)),
        Rule("method.time_limit_s", "a number of seconds > 0", _positive),
        Rule("method.load_limit_s", "a number of seconds > 0", _positive),
        Rule("method.memory_mb", "an integer > 0 (MiB)", lambda v, c: nonneg_int(v) and v > 0),
    )

    name: str = "solver"
    # the function, `solve(x, y, n_bits, k_sparse)`; the default is the project's own Fourier solver
    path: str = "sweep.challenge.references:fourier"
    # values a run may take out of arrays into Python before it is flagged as working outside numpy; null: n_bits
    max_escaped: Optional[int] = None
    # the most seconds the solve may take on the parent's clock (the group's 60 s): past it, killed and FAILED
    time_limit_s: float = 60.0
    # the most seconds loading the module (its top-level code) and checking the function may take
    load_limit_s: float = 30.0
    # the sandbox's address space (RLIMIT_AS), MiB: past it an allocation fails
    memory_mb: int = 4096

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        if cfg.select("tracker.source", METHOD) not in (METHOD, Source.AUTO.value):
            raise ConfigError(
                f"tracker.source={cfg.select('tracker.source')!r} is not allowed for method=solver: expected auto "
                "(a user's solver has no hand-placed trace)"
            )
        if cfg.select("device.backend", "numpy") != "numpy":
            raise ConfigError(
                f"device.backend={cfg.select('device.backend')!r} is not allowed for method=solver: expected numpy "
                "(the solver gets numpy arrays and is measured by the numpy trace): device=cpu"
            )
        limits = Limits(
            load_s=float(cfg.select("method.load_limit_s", cls.load_limit_s)),
            memory_mb=int(cfg.select("method.memory_mb", cls.memory_mb)),
        )
        load.check(str(cfg.select("method.path")), limits)  # loaded in a sandbox: ConfigError

    def limits(self) -> Limits:
        return Limits(
            load_s=self.load_limit_s, memory_mb=self.memory_mb, cpu_s=self.load_limit_s + 2 * self.time_limit_s
        )

    def solve(self, ctx: Context) -> Outcome:
        n, k = ctx.problem.n_bits, ctx.problem.k_sparse
        x, y = ctx.data.x_train, ctx.data.y_train  # sent as copies: nothing the solver does reaches them
        traced = ctx.trace.enabled
        with load.sandbox(self.path, self.limits()) as box:
            sent = box.call(x, y, n, k, traced, timeout=self.time_limit_s, harness=load.HARNESS)
            wall, used, how = box.wall_s, box.used, box.how
        if not isinstance(sent, dict) or "answer" not in sent:
            raise EntrantFailed(f"its harness's answer is not one: {str(sent)[:200]}")
        found = indices(sent["answer"], n)
        judged: dict[str, float] = {"wall_clock_s": wall}  # the parent's clock, of the call alone
        if traced:
            trace, escaped = read_trace(sent)
            # a process started beside it (alive at the end, or ended and waited for): work no trace saw
            unseen = check_trace(trace, x.size, y.size) or used.processes > 0 or used.waited_cpu_s > 0
            ctx.trace.extend(trace)
            ctx.trace.escaped += escaped
            allowed = n if self.max_escaped is None else self.max_escaped
            judged.update(escaped_allowed=allowed, outside_numpy=float(escaped > allowed), untraced=float(unseen))
        judged.update(
            sandbox_cpu_s=used.cpu_s, sandbox_minor_faults=used.minor_faults, sandbox_peak_rss_mb=used.peak_rss_mb
        )
        outcome = subset_outcome(ctx.problem, ctx.data, found, **judged)
        text, sha = load.source(find(self.path, load.FIELD))
        outcome.tags[SOLVER_SHA_TAG] = sha
        outcome.tags[SANDBOX_TAG] = how
        outcome.artifacts[SOURCE_ARTIFACT] = text
        return outcome


def read_trace(sent: dict[str, Any]) -> tuple[Trace, int]:
    """The trace and escaped count the sandbox sent (EntrantFailed: they are not a trace and a count)."""
    escaped = sent.get("escaped")
    try:
        trace, _, _ = stored.loads(str(sent.get("trace")))  # its events and counts checked as a stored trace's
        ok = True
    except Exception:  # noqa: BLE001 - whatever it is, it is not a trace
        ok = False
    if not ok or not isinstance(escaped, int) or isinstance(escaped, bool) or escaped < 0:
        raise EntrantFailed("its process sent back a trace that is not one")
    return trace, escaped


def check_trace(trace: Trace, x_size: int, y_size: int) -> bool:
    """True where the trace cannot be the solve's: it does not start with the writes of x and y, a buffer is read
    before it is written, or it never reads x or y (the answer came from work the trace did not see)."""
    events = trace.events
    if events[:2] != [(1, "x", x_size), (1, "y", y_size)]:
        return True
    written: set[str] = set()
    read: set[str] = set()
    for op, name, _ in events:
        if op == 1:
            written.add(name)
        elif name not in written:
            return True
        else:
            read.add(name)
    return not {"x", "y"} <= read


def indices(answer: Any, n_bits: int) -> tuple[int, ...]:
    """The answer as the sorted secret: distinct integers in [0, n_bits); ValueError (the run FAILED) otherwise. More
    values than n_bits cannot be distinct indices, and are refused by their count first: an array of 10**8 zeros
    was turned into 10**8 Python objects and its whole list written into the reason (the run ran minutes)."""
    size = answer.size if isinstance(answer, np.ndarray) else None
    values = np.asarray(answer, dtype=object).ravel().tolist() if answer is not None and size is None else None
    size = len(values) if values is not None else size
    if size is not None and size > n_bits:
        raise ValueError(
            f"solve returned {size:,} values: expected the secret's indices, at most {n_bits} distinct integers in "
            f"0..{n_bits - 1}"
        )
    if isinstance(answer, np.ndarray):
        values = answer.astype(object).ravel().tolist()
    if values is None or not all(
        isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) and float(v).is_integer() for v in values
    ):
        raise ValueError(f"solve returned {answer!r}: expected the secret's indices, a sequence of integers")
    out = sorted(int(v) for v in values)
    if any(not 0 <= v < n_bits for v in out) or len(set(out)) != len(out):
        raise ValueError(f"solve returned {out}: expected distinct indices in 0..{n_bits - 1}")
    return tuple(out)
