"""OmegaConf's interpolation parser, memoised: one parse tree per distinct string, reused by every job.

Every job resolves the same handful of interpolation strings (`hydra.sweep.dir`, `hydra.sweep.subdir`, the job
log's file name, ...), and OmegaConf parses each one afresh with ANTLR's pure-Python runtime on every access:
~a third of a batched job's time in a worker. A parse tree only depends on its string (its tokens keep their own
input stream; resolving reads the tree and never changes it), so it is shared. Errors are not cached (raised
again). Fast path only: installed behind the launcher's OmegaConf version gate (`_fast.fast_paths`).
"""

from __future__ import annotations

import functools
from typing import Any

import omegaconf.base
import omegaconf.grammar_parser

MAX_STRINGS = 4096  # distinct interpolation strings kept (a sweep has a few dozen)


def install() -> None:
    """Memoise `omegaconf.grammar_parser.parse` where OmegaConf's resolver calls it (idempotent)."""
    original: Any = omegaconf.grammar_parser.parse
    if getattr(original, "memoised", False):
        return
    cached: Any = functools.lru_cache(maxsize=MAX_STRINGS)(original)
    cached.memoised = True
    omegaconf.grammar_parser.parse = cached
    omegaconf.base.parse = cached  # base.py resolves through the name it imported
