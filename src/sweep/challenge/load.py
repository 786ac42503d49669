"""`method.path`: where a user's solver is, as `<file.py>:<function>` or `<package.module>:<function>`.

A relative file is looked for in the directory the command runs in (the workers run there too), then in the
project's root (where `examples/solvers/` is, so the preset's paths hold from any directory). The function must
take the challenge's four arguments, `solve(x, y, n_bits, k_sparse)`. Everything that can be wrong with the path
(its form, a missing file or module, a module that fails to import, a missing function, a signature that cannot
take those four) is one `ConfigError` naming `method.path`, raised by the check before any job starts. A file is
loaded once per process while it is unchanged (its size and modification time), under a module name of its own,
so two solvers in files of the same name do not meet.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib
import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sweep.errors import ConfigError
from sweep.paths import PROJECT_ROOT

FORM = "<file.py>:<function> or <package.module>:<function>"
ARGS = ("x", "y", "n_bits", "k_sparse")  # what the challenge passes, in this order


@dataclass(frozen=True)
class Loaded:
    fn: Callable[..., Any]
    source: str  # the text of the file that defines it ("" where it cannot be read)
    sha: str  # the source's sha256, first 16 hex digits: which version of the solver a run measured


def split(path: str) -> tuple[str, str]:
    """(file or module, function name); ConfigError when `path` has not the form."""
    where, sep, name = str(path).rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise ConfigError(f"method.path={path!r} is not allowed: expected {FORM}")
    return where, name


def is_file(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def load(path: str) -> Loaded:
    """The solver `path` names, checked (see the module's docstring)."""
    where, name = split(path)
    module = _file_module(path, where) if is_file(where) else _package_module(path, where)
    fn = getattr(module, name, None)
    if fn is None:
        known = sorted(k for k, v in vars(module).items() if inspect.isfunction(v) and not k.startswith("_"))
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else (f"; it has {', '.join(known)}" if known else "")
        raise ConfigError(f"method.path={path}: {where} has no function {name!r}{hint}")
    if not callable(fn):
        raise ConfigError(f"method.path={path}: {name} is a {type(fn).__name__}, not a function")
    try:
        signature = inspect.signature(fn)
        signature.bind(*ARGS)
    except TypeError as e:
        raise ConfigError(
            f"method.path={path}: {name}{_signature(fn)} cannot be called as {name}({', '.join(ARGS)}): {e}"
        ) from None
    except ValueError:  # a builtin without a signature: it is called and its own error says why
        pass
    source = _source(module)
    return Loaded(fn, source, hashlib.sha256(source.encode()).hexdigest()[:16])


def _signature(fn: Any) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def _file_module(path: str, where: str) -> Any:
    file = Path(where)
    if not file.is_file() and not file.is_absolute() and (PROJECT_ROOT / file).is_file():
        file = PROJECT_ROOT / file
    if not file.is_file():
        folder = file.parent if file.parent.is_dir() else None
        near = difflib.get_close_matches(file.name, [p.name for p in folder.glob("*.py")], n=1) if folder else []
        hint = f" (did you mean {file.parent / near[0]}?)" if near else ""
        raise ConfigError(f"method.path={path}: no file {where} (in {Path.cwd()} or {PROJECT_ROOT}){hint}")
    resolved = file.resolve()
    stat = resolved.stat()
    return _import_file(str(resolved), stat.st_mtime_ns, stat.st_size, path)


@functools.lru_cache(maxsize=64)
def _import_file(resolved: str, mtime_ns: int, size: int, path: str) -> Any:
    """The module of file `resolved` as it is now (a changed file is loaded again: mtime and size are the key)."""
    name = "sweep_solver_" + hashlib.sha256(f"{resolved}:{mtime_ns}".encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, resolved)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # what its own classes and pickles look up
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's module failed as it loaded: one line, its cause
        del sys.modules[name]
        raise ConfigError(f"method.path={path}: loading {Path(resolved).name} raised {_one_line(e)}") from None
    return module


def _package_module(path: str, where: str) -> Any:
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as e:
        raise ConfigError(f"method.path={path}: no module named {e.name!r} on the path") from None
    except Exception as e:  # noqa: BLE001 - the user's module failed as it loaded: one line, its cause
        raise ConfigError(f"method.path={path}: importing {where} raised {_one_line(e)}") from None


def _one_line(e: BaseException) -> str:
    """The error as one line, at its place in the user's code: a SyntaxError at the file and line it names (its
    last frame is importlib's), another error at the deepest frame in a file not of Python's import machinery."""
    if isinstance(e, SyntaxError) and e.filename:
        return f"{type(e).__name__}: {e.msg} ({Path(e.filename).name}, line {e.lineno})"
    frames = traceback.extract_tb(e.__traceback__)
    own = [f for f in frames if "importlib" not in f.filename and f.filename != __file__]
    place = (own or frames)[-1] if frames else None
    at = f" ({Path(place.filename).name}, line {place.lineno})" if place is not None else ""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}{at}" if text else f"{type(e).__name__}{at}"


def _source(module: Any) -> str:
    try:
        return inspect.getsource(module)
    except (OSError, TypeError):
        return ""
