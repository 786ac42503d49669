"""Where a user's function is, `<file.py>:<function>` or `<package.module>:<function>`, found by the parent
without running any of it (the module is imported only in the sandbox, sweep.sandbox.box).

A relative file is looked for in the directory the command runs in, then in the project's root (where
`examples/` is, so a preset's paths hold from any directory). A module is found on the parent's `sys.path` by
its finder alone (no package's `__init__` runs here). A path that has not the form, a missing file or module is
one `ConfigError` naming the field.
"""

from __future__ import annotations

import difflib
import importlib.machinery
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from sweep.config.fields import Rule
from sweep.errors import ConfigError
from sweep.paths import PROJECT_ROOT, shown

FORM = "<file.py>:<function> or <package.module>:<function>"


def rule(field: str, example: str) -> Rule:
    """The field's value rule: the form, with an example (a file given without its function, `my_solver.py`, was
    told only the form; the example shows where the function's name goes)."""
    return Rule(field, f"{FORM}, e.g. {example}", lambda v, c: isinstance(v, str) and ":" in v)


@dataclass(frozen=True)
class Target:
    path: str  # as the user wrote it
    where: str  # its file or module part, as written
    function: str
    file: Optional[Path]  # the resolved file, for the file form
    module: Optional[str]  # the module's name, for the module form
    origin: Optional[Path]  # the file or package folder the module is (to be seen in the sandbox)
    root: Optional[Path]  # the folder on sys.path the module is found in
    module_file: Optional[Path] = None  # the module's own file, for the module form

    def identity(self) -> tuple:
        """What a check of this target depends on: the file's path, size and modification time."""
        f = self.file or self.module_file
        st = f.stat() if f is not None else None
        return (self.path, str(f), st.st_size if st else 0, st.st_mtime_ns if st else 0)


def split(path: str, field: str) -> tuple[str, str]:
    """(file or module, function name); ConfigError when `path` has not the form."""
    where, sep, name = str(path).rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise ConfigError(f"{field}={path!r} is not allowed: expected {FORM}")
    return where, name


def is_file(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def find(path: str, field: str = "method.path") -> Target:
    """The target `path` names (ConfigError naming `field`: its form, a missing file or module)."""
    where, name = split(path, field)
    if is_file(where):
        try:
            file = _file(path, where, field)
        except OSError as e:  # a name the filesystem refuses (ENAMETOOLONG): was the OSError's traceback
            raise ConfigError(f"{field}={shown(path)}: {e.strerror}: expected {FORM}") from None
        return Target(path, where, name, file, None, None, None)
    origin, root, own = _module(path, where, field)
    return Target(path, where, name, None, where, origin, root, own)


def _file(path: str, where: str, field: str) -> Path:
    file = Path(where)
    if not file.is_file() and not file.is_absolute() and (PROJECT_ROOT / file).is_file():
        file = PROJECT_ROOT / file
    if file.is_dir():  # (it said "no file <the folder>", as if nothing were there)
        raise ConfigError(f"{field}={path}: {where} is a directory: expected {FORM}")
    if file.is_symlink() and not file.exists():  # (it said "no file X (did you mean X?)": the link's own name)
        raise ConfigError(f"{field}={path}: {where} is a link to {file.readlink()}, which does not exist")
    if not file.is_file():
        folder = file.parent if file.parent.is_dir() else None
        names = [p.name for p in folder.glob("*.py") if p.is_file()] if folder else []
        near = difflib.get_close_matches(file.name, names, n=1)
        hint = f" (did you mean {file.parent / near[0]}?)" if near else ""
        looked = (
            ""
            if Path(where).is_absolute()
            else f" (in {' or '.join(dict.fromkeys(map(str, (Path.cwd(), PROJECT_ROOT))))})"
        )
        raise ConfigError(f"{field}={path}: no file {where}{looked}{hint}")
    return file.resolve()


def _module(path: str, where: str, field: str) -> tuple[Path, Path, Optional[Path]]:
    """(the top package's folder or the module's file, the sys.path folder it is in, the module's own file), by
    the finders alone."""
    parts = where.split(".")
    # the directory the command runs in first, as `python -m sweep` has it (sys.path[0] = ''): the console script
    # `.venv/bin/sweep` has its own folder there, and `my_solver:solve` beside the command was "no module named"
    entries = list(dict.fromkeys([str(Path.cwd()), *(p if p else str(Path.cwd()) for p in sys.path)]))
    spec = importlib.machinery.PathFinder.find_spec(parts[0], entries)
    if spec is None or spec.origin in (None, "built-in", "frozen") and not spec.submodule_search_locations:
        if parts[0] in sys.builtin_module_names or spec is not None:
            raise ConfigError(f"{field}={path}: {parts[0]} is built into Python: expected a module in a file")
        raise ConfigError(f"{field}={path}: no module named {parts[0]!r} on the path")
    locations = list(spec.submodule_search_locations or [])
    top = Path(locations[0]) if locations else Path(str(spec.origin))
    for i in range(1, len(parts)):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), locations)
        if spec is None:
            raise ConfigError(f"{field}={path}: no module named {'.'.join(parts[: i + 1])!r} on the path")
        locations = list(spec.submodule_search_locations or [])
    own = Path(spec.origin) if spec.origin and Path(spec.origin).is_file() else None
    return top.resolve(), top.resolve().parent, own
