"""The project's exact methods as challenge solvers, `solve(x, y, n_bits, k_sparse)`: the references a
`sweeps=parity_challenge` round ranks the users' solvers against, measured by the same harness under the same
rules (`method=solver method.path=sweep.challenge.references:fourier`).

Each runs its method class's own `solve` at its defaults on a sparse-parity problem of the given sizes, with the
training data as its only data (no test set: accuracy is the scorer's). km is not here: it asks the label of
inputs it makes up, which the challenge's data cannot answer.
"""

from __future__ import annotations

from typing import Any

from sweep.backend import Backend
from sweep.methods.base import Context
from sweep.methods.fourier import Fourier
from sweep.methods.gf2 import GF2
from sweep.methods.smt import SMT
from sweep.problems.base import Dataset
from sweep.problems.sparse_parity import SparseParity
from sweep.trace.trace import NULL_TRACE

# the array API the methods compute through, imported as this module loads (in the sandbox: before the clock,
# as a user's module imports what it needs), not at the first solve (under the clock and the trace)
NUMPY = Backend("numpy")


def solved_by(method: Any, x: Any, y: Any, n_bits: int, k_sparse: int) -> tuple[int, ...]:
    """The secret `method` finds from the training rows (x, y) alone."""
    problem = SparseParity(n_bits=n_bits, k_sparse=k_sparse, n_train=len(x), n_test=1)
    data = Dataset(x_train=x, y_train=y, x_test=x[:0], y_test=y[:0], secret=())
    outcome = method.solve(Context(problem=problem, data=data, backend=NUMPY, trace=NULL_TRACE))
    return tuple(outcome.secret_found or ())


def gf2(x: Any, y: Any, n_bits: int, k_sparse: int) -> tuple[int, ...]:
    """Gaussian elimination over GF(2) on rows packed into Python ints (sweep.methods.gf2)."""
    return solved_by(GF2(), x, y, n_bits, k_sparse)


def fourier(x: Any, y: Any, n_bits: int, k_sparse: int) -> tuple[int, ...]:
    """The Walsh coefficient of every k-subset, the largest wins (sweep.methods.fourier)."""
    return solved_by(Fourier(), x, y, n_bits, k_sparse)


def smt(x: Any, y: Any, n_bits: int, k_sparse: int) -> tuple[int, ...]:
    """Backtracking over k-subsets, screened on a few rows (sweep.methods.smt)."""
    return solved_by(SMT(), x, y, n_bits, k_sparse)
