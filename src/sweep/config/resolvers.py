"""The resolvers a preset's values may call (registered with the schemas, sweep.config.schema): a challenge round's
entrants and its fresh seeds (sweeps/parity_challenge.yaml), `${entrants:<list>,<list>}` and `${fresh_seeds:<count>}`,
that the preset's `hydra.sweeper.params` read.

A solver must not be tuned to the seeds it is scored on, so a round draws its own from the operating system's
randomness when the command starts. They are drawn once per process (the sweeper, the naming of the jobs and the
check all read the same sweep), and every run records its own as the param `problem.seed`, so a round can be
scored again on exactly its seeds (`problem.seed=...` on the command line replaces the preset's).
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any, Iterable

from sweep.config.fields import SEED_MAX

PLAIN = re.compile(r"[\w./:-]+")  # a path Hydra's override grammar reads as it is


@functools.lru_cache(maxsize=None)
def fresh_seeds(count: int) -> str:
    """`count` distinct seeds in [0, SEED_MAX], comma-separated (a sweep's values), the same for the whole process."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"challenge.seeds={count!r} is not allowed: expected an integer >= 1")
    return ",".join(str(s) for s in random.SystemRandom().sample(range(SEED_MAX + 1), count))


def entrants(*lists: Iterable[Any]) -> str:
    """The items of `lists` (the solvers, then the references), each once: one sweep's values (quoted where Hydra's
    override grammar would read them otherwise: a space, a comma, a quote, ...)."""
    items = list(dict.fromkeys(str(v) for values in lists for v in (values or ())))
    if not items:
        raise ValueError("challenge.solvers and challenge.references are both empty: a round needs an entrant")
    return ",".join(v if PLAIN.fullmatch(v) else "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" for v in items)
