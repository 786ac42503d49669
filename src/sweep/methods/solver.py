"""method=solver: a user's own `solve(x, y, n_bits, k_sparse)`, measured as the project's methods are.

The group's challenge's interface: the function gets the training rows (x: (n_train, n_bits) of +-1.0, y: their
+-1.0 labels) and the sizes, nothing else (not the secret, not the test set), and returns the secret's indices;
accuracy is the project's to evaluate, on the test set, after the clock. `method.path` names the function
(`sweep.methods.solver_path`: a file or a module; checked before any job starts).

It runs under the automatic numpy trace (`tracker.source=auto`, the only source it has: sweep.trace.auto's
NumpyTracer): every numpy operation on the data, or on what is made from it, is a read and a write of its
buffers; a value taken out of an array into Python (`.item()`, `float()`, `int()`, `tolist()`, iterating,
`tobytes()`) is a read too, and counted (metric `escaped`). What Python then does with such values is out of the
trace's sight, so a run that takes more than `method.max_escaped` of them (by default n_bits: a decision per bit,
or the answer as a list; not the rows a Python-side elimination needs) is flagged as work outside numpy (metric
`outside_numpy` = 1), not ranked as cheap. The whole solve is one traced step, whatever `tracker.scope`; with
tracker=none nothing is traced, and nothing counted.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

import numpy as np

from sweep.config.fields import Rule, nonneg_int
from sweep.errors import ConfigError
from sweep.methods.base import SEEDS_ONLY, Context, MethodBase, Outcome, subset_outcome
from sweep.methods.solver_path import load
from sweep.trace.source import METHOD, Source, recording

SOURCE_ARTIFACT = "solver.py"  # the solver's source, as the run measured it
SOLVER_SHA_TAG = "sweep.solver_sha"  # ... and its sha256 (16 hex digits), a tag on the run


@dataclass
class Solver(MethodBase):
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity",)  # the challenge's problem: labels are parities
    trace_source: ClassVar[str] = Source.AUTO.value  # its only source: a user's code has no hand-placed trace
    vectorised: ClassVar[tuple[str, ...]] = SEEDS_ONLY  # batched as several runs in one task
    field_rules: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "method.path",
            "<file.py>:<function> or <package.module>:<function>",
            lambda v, c: isinstance(v, str) and ":" in v,
        ),
        Rule("method.max_escaped", "an integer >= 0, or null (n_bits)", lambda v, c: v is None or nonneg_int(v)),
    )

    name: str = "solver"
    # the function, `solve(x, y, n_bits, k_sparse)`; the default is the project's own Fourier solver
    path: str = "sweep.challenge.references:fourier"
    # values a run may take out of arrays into Python before it is flagged as working outside numpy; null: n_bits
    max_escaped: Optional[int] = None

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
        load(str(cfg.select("method.path")))  # the file, the function, its signature: ConfigError

    def solve(self, ctx: Context) -> Outcome:
        solver = load(self.path)
        n, k = ctx.problem.n_bits, ctx.problem.k_sparse
        x, y = ctx.data.x_train.copy(), ctx.data.y_train.copy()  # the solver's own: it may write them
        # the automatic numpy trace whatever the run's source and backend: a user's code has no other
        with recording(ctx.trace, Source.AUTO, "numpy", loaded={"x": x, "y": y}) as rec:
            answer = rec.unwrap(solver.fn(rec["x"], rec["y"], n, k))
        found = indices(answer, n)
        allowed = n if self.max_escaped is None else self.max_escaped
        judged = {"escaped_allowed": allowed, "outside_numpy": rec.escaped > allowed} if rec.tracer else {}
        outcome = subset_outcome(ctx.problem, ctx.data, found, **{name: float(v) for name, v in judged.items()})
        outcome.tags[SOLVER_SHA_TAG] = solver.sha
        outcome.artifacts[SOURCE_ARTIFACT] = solver.source
        return outcome


def indices(answer: Any, n_bits: int) -> tuple[int, ...]:
    """The answer as the sorted secret: distinct integers in [0, n_bits); ValueError (the run FAILED) otherwise."""
    values = np.asarray(answer, dtype=object).ravel().tolist() if answer is not None else None
    if values is None or not all(
        isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) and float(v).is_integer() for v in values
    ):
        raise ValueError(f"solve returned {answer!r}: expected the secret's indices, a sequence of integers")
    out = sorted(int(v) for v in values)
    if any(not 0 <= v < n_bits for v in out) or len(set(out)) != len(out):
        raise ValueError(f"solve returned {out}: expected distinct indices in 0..{n_bits - 1}")
    return tuple(out)
