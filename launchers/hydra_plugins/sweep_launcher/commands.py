"""Command lines printed as hints ("next: ...", "re-run with ..."): each must work when pasted into the shell
the user ran this one from, whether or not its virtual environment is activated.

So a hint names what runs the command from the current directory: the package's console script when it is on
PATH and is the one next to this interpreter (its bare name), else that script's path (`.venv/bin/sweep-ui`
from the project's root), else this interpreter with `-m` (its own path: `python` may be another one).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Optional


def command(module: str, *args: str) -> str:
    """The line that runs `python -m <module> <args>` with this interpreter when pasted into a shell here."""
    return " ".join([*_program(module), *(shlex.quote(a) for a in args)])


def prog(module: str, then: str = "") -> "Prog":
    """The command's name as the user typed it (then `then`: a subcommand), which each of its one-line messages
    begins with: `python -m <module>` where it runs so, else its console script's name (`sweep-compare`), whatever
    path ran the script. Worked out when said, not when imported: a module imported before the command's own
    `__main__` ran (a process forked with the imports done) says it as the command does."""
    return Prog(module, then)


class Prog:
    def __init__(self, module: str, then: str = "") -> None:
        self.module, self.then = module, then

    def __str__(self) -> str:
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None and spec.name.removesuffix(".__main__") == self.module:
            return f"python -m {self.module}{self.then}"
        return (_script_of(self.module) or f"python -m {self.module}") + self.then

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def this_command(*extra: str, drop: tuple[str, ...] = ()) -> str:
    """The line that runs this process's command again (its arguments, then `extra`, which replace the
    arguments that set the same keys; `drop`: keys whose arguments go too), pasted into a shell here."""
    keys = {e.split("=", 1)[0].lstrip("+~") for e in extra} | set(drop)
    args = [a for a in sys.argv[1:] if a.split("=", 1)[0].lstrip("+~") not in keys] + list(extra)
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None:  # python -m pkg: pkg.__main__
        return command(spec.name.removesuffix(".__main__"), *args)
    return " ".join([_pasteable(Path(sys.argv[0])), *(shlex.quote(a) for a in args)])


def _program(module: str) -> tuple[str, ...]:
    script = _script_of(module)
    # installed beside this interpreter (a venv's bin/), or in its scheme's scripts directory (/usr/local/bin)
    for where in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        if script is not None and (where / script).is_file():
            return (_pasteable(where / script),)
    return (shlex.quote(_from_cwd(Path(sys.executable))), "-m", module)


def _pasteable(path: Path) -> str:
    """A script by its bare name when the shell's PATH finds that very file, else by its path from here."""
    found = shutil.which(path.name)
    if found is not None and _same(Path(found), path):
        return shlex.quote(path.name)
    return shlex.quote(_from_cwd(path))


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _from_cwd(path: Path) -> str:
    """`path` relative to the current directory when it lies below it (`.venv/bin/x`), else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        rel = absolute.relative_to(Path.cwd())
    except ValueError:
        return str(absolute)
    return str(rel) if rel.parent != Path(".") else f"./{rel}"


@lru_cache(maxsize=None)
def _script_of(module: str) -> Optional[str]:
    """The console script whose entry point is `module` (or its `__main__`), from the installed metadata."""

    for ep in entry_points(group="console_scripts"):
        if ep.value.split(":", 1)[0].strip() in (module, f"{module}.__main__"):
            return ep.name
    return None
