"""`method.path`: where a user's solver is, as `<file.py>:<function>` or `<package.module>:<function>`
(sweep.sandbox.target finds it), loaded and checked in its own sandbox (sweep.sandbox), never in the process
that records.

The function must take the challenge's four arguments, `solve(x, y, n_bits, k_sparse)`. Everything that can be
wrong with it (the path's form, a missing file or module, a module that fails, exits or hangs as it loads, a
missing function, a signature that cannot take those four) is one `ConfigError` naming `method.path`, raised by
the check before any job starts. A check is made once per process while the file is unchanged (its size and
modification time). The source a run records is read here, by the parent, from the file the sandbox loads.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from sweep.errors import ConfigError
from sweep.sandbox import Limits, Sandbox
from sweep.sandbox.target import FORM, Target, find

ARGS = ("x", "y", "n_bits", "k_sparse")  # what the challenge passes, in this order
HARNESS = "sweep.challenge.traced:solve"  # the trace around it, in the sandbox
FIELD = "method.path"
__all__ = ["ARGS", "FORM", "HARNESS", "check", "sandbox", "source"]


def sandbox(path: str, limits: Limits) -> Sandbox:
    """The solver's sandbox (not started: `open()` or `with`)."""
    return Sandbox(path, field=FIELD, signature=ARGS, limits=limits, harnesses=(HARNESS,))


def check(path: str, limits: Limits) -> None:
    """ConfigError naming method.path where the solver cannot be loaded and called as solve(x, y, n_bits, k_sparse)."""
    why = _checked(find(path, FIELD).identity(), limits)
    if why:
        raise ConfigError(why)


@functools.lru_cache(maxsize=64)
def _checked(identity: tuple, limits: Limits) -> str:
    try:
        sandbox(identity[0], limits).open().close()
    except ConfigError as e:
        return str(e)
    return ""


def source(target: Target) -> tuple[str, str]:
    """(the text of the file that defines the solver, its sha256's first 16 hex digits), read by the parent."""
    file = target.file or target.module_file
    try:
        text = Path(file).read_text() if file else ""
    except (OSError, UnicodeDecodeError):
        text = ""
    return text, hashlib.sha256(text.encode()).hexdigest()[:16]
