"""The scorer's identity: a hash of the code that measures and judges a run, recorded on every run (tag
`sweep.scorer`), so a leaderboard never ranks runs scored by different versions of it side by side.

The scorer is what turns a solve into figures: the trace and its trackers (ARD, DMC, DMD, ByteDMD, cache,
energy, with the memory hierarchies' prices), the problem (the data and the labels), and the evaluation (the
accuracy of an answer, the solver's harness: its inputs, its answer's and its trace's checks, values taken out of
arrays, the sandbox it runs in).
Anything else (a method, the launcher, the reports) may change without changing a run's score.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import sweep
from sweep.paths import CONF_DIR

PACKAGE_DIR = Path(sweep.__file__).resolve().parent
# the scorer's files: folders (every .py under them) and files of the package, and the energy prices (conf/)
CODE = ("trace", "trackers", "problems", "energy/hierarchy.py", "energy/model.py", "methods/base.py")
CODE += ("methods/solver.py", "methods/solver_path.py", "challenge/traced.py", "sandbox")
# the character challenge's harness: its method, the entrant's run, the streaming score, the sampled steps
CODE += ("methods/char_model.py", "methods/char_entrant.py", "challenge/harness.py", "methods/char_stream.py")
CODE += ("challenge/sampled_steps.py",)
CONF = ("energy",)


def files(package_dir: Path = PACKAGE_DIR, conf_dir: Path = CONF_DIR) -> list[tuple[str, Path]]:
    """(name, path) of every file the scorer is made of, in a fixed order."""
    out: list[tuple[str, Path]] = []
    for kind, root, names, suffix in (("code", package_dir, CODE, ".py"), ("conf", conf_dir, CONF, ".yaml")):
        for name in names:
            p = root / name
            found = sorted(p.rglob(f"*{suffix}")) if p.is_dir() else [p]
            out += [(f"{kind}/{f.relative_to(root).as_posix()}", f) for f in found if "__pycache__" not in f.parts]
    return out


def scorer_hash(package_dir: Path = PACKAGE_DIR, conf_dir: Path = CONF_DIR) -> str:
    """The sha256 of the scorer's files (names and contents), first 16 hex digits."""
    h = hashlib.sha256()
    for name, path in files(package_dir, conf_dir):
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def this_scorer() -> str:
    """This process's scorer (its files as they were when first asked: a worker hashes once, not once a run)."""
    return scorer_hash()
