"""The code's shape (docs/architecture.md): no import circles, a launcher plugin that imports nothing of the
app nor Hydra's internals and its version-gated fast-path modules only behind the gate, launcher files of a
readable size, defaults written in one place. Read from the source (ast), so a lazy import inside a function
counts as much as one at the top."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

SOURCES = {"src": ROOT / "src", "launchers": ROOT / "launchers"}
FAST_PATH = {
    "hydra_plugins.sweep_launcher._fast.compose",
    "hydra_plugins.sweep_launcher._fast.in_place",
    "hydra_plugins.sweep_launcher._fast.run_job",
    "hydra_plugins.sweep_launcher._fast.parse_cache",
    "hydra_plugins.sweep_launcher._fast.template",
    "hydra_plugins.sweep_launcher._fast.compose_once",
}
MAX_LINES = 400


DOTTED = re.compile(r"sweep(\.\w+)+")  # the app's classes named by string (a plugin's own _target_ is not an import)


def _modules() -> dict[str, Path]:
    out = {}
    for base in SOURCES.values():
        for f in base.rglob("*.py"):
            parts = list(f.relative_to(base).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imports(name: str, path: Path) -> list[tuple[str, bool]]:
    """(imported module name, at module top level) for every import of a module (those under TYPE_CHECKING
    too: an annotation's dependency is a dependency), and every module named by a dotted string (imported by
    name: schema.CLASSES, `_target_`s), as a lazy import."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    # a command line's program (commands.command("sweep.spool", ...): a hint, run in a process of its own)
    programs = {
        id(n.args[0])
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and n.args
        and (getattr(n.func, "id", None) or getattr(n.func, "attr", None)) == "command"
    }
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out += [(a.name, id(n) in top) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - n.level + 1] + ([n.module] if n.module else []))
            out += [(f"{base}.{a.name}", id(n) in top) for a in n.names] + [(base, id(n) in top)]
        elif (
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and DOTTED.fullmatch(n.value)
            and id(n) not in programs
        ):
            out.append((n.value, False))
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()

    def known(name: str) -> str | None:  # the project module a dotted name lives in
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    return {m: {k for dep, _ in _imports(m, f) if (k := known(dep)) and k != m} for m, f in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    graph = _graph()
    assert "sweep.config.check" in graph and "hydra_plugins.sweep_launcher._core" in graph
    assert not _cycles(graph), "modules that import each other (directly or around a circle): " + str(_cycles(graph))


def test_the_checker_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_launchers_import_neither_the_app_nor_hydra_internals_and_the_fast_path_only_behind_its_gate():
    mods = {m: f for m, f in _modules().items() if m.startswith("hydra_plugins")}
    assert FAST_PATH <= set(mods)
    bad = []
    for m, f in mods.items():
        for dep, at_top in _imports(m, f):
            if dep == "sweep" or dep.startswith("sweep."):
                bad.append(f"{m} imports {dep}: the launcher plugin is generic (the app plugs in through hooks.py)")
            if dep.startswith("hydra._internal"):
                bad.append(f"{m} imports {dep}: Hydra's public API only (plugin interfaces, ConfigLoader, ...)")
            if dep in FAST_PATH and at_top and m not in FAST_PATH:  # one fast-path module may import another
                bad.append(f"{m} imports {dep} at start-up: a fast-path module is imported only behind the gate")
    assert not bad, "\n".join(bad)


def test_no_source_file_is_over_400_lines():
    long = {
        str(f.relative_to(ROOT)): n
        for base in SOURCES.values()
        for f in base.rglob("*.py")
        if (n := len(f.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def test_an_options_schema_has_its_class_fields_and_defaults_and_its_yaml_repeats_none():
    """A class's fields and defaults are its schema's (schema.from_class derives them; this guards the
    derivation), and conf/<group>/*.yaml sets only what differs from its schema: a default is written once."""
    import dataclasses

    import yaml
    from hydra.utils import get_class

    from sweep.config.schema import SCHEMAS

    def defaults(dc: type) -> dict:
        return {
            f.name: f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
            for f in dataclasses.fields(dc)
            if f.init and f.name != "_target_"
        }

    checked, bad = 0, []
    for group, options in SCHEMAS.items():
        for name, schema in options.items():
            source = getattr(schema, "source_class", None)
            if source is not None:
                checked += 1
                if defaults(get_class(source)) != defaults(schema):
                    bad.append(f"{source}: fields or defaults differ from schema {group}/{name}")
        for f in sorted((ROOT / "conf" / group).glob("*.yaml")):
            doc = yaml.safe_load(f.read_text()) or {}
            entries = doc.get("defaults", [])
            base = next(
                (v for e in entries if isinstance(e, dict) for k, v in e.items() if k.startswith("/schema/")), None
            )
            if base is None:  # an option that extends another option of its group (device=torch_cpu: cpu)
                parent = next(e for e in entries if isinstance(e, str) and e.startswith(f"/{group}/"))
                parent_doc = yaml.safe_load((ROOT / "conf" / f"{parent.split('@')[0].lstrip('/')}.yaml").read_text())
                bad += [
                    f"conf/{group}/{f.name}: {k}: {v!r} repeats {parent}'s"
                    for k, v in doc.items()
                    if k != "defaults" and parent_doc.get(k) == v
                ]
                continue
            own = defaults(options[base])
            bad += [
                f"conf/{group}/{f.name}: {k}: {v!r} repeats its schema's default"
                for k, v in doc.items()
                if k in own and k != "name" and own[k] == v
            ]
    assert checked >= 15 and not bad, "\n".join(bad)


def test_the_app_imports_only_the_launchers_public_api():
    """The app's side of the seam is `hydra_plugins.sweep_launcher.api`: the plugin's other modules are its own."""
    public = "hydra_plugins.sweep_launcher.api"
    bad = [
        f"{m} imports {dep}"
        for m, f in _modules().items()
        if m == "sweep" or m.startswith("sweep.")
        for dep, _ in _imports(m, f)
        if dep.startswith("hydra_plugins.sweep_launcher")
        and dep not in (public, "hydra_plugins.sweep_launcher")
        and not dep.startswith(public + ".")
    ]
    assert not bad, "\n".join(bad)
    from hydra_plugins.sweep_launcher import api

    missing = [name for name in api.__all__ if getattr(api, name, None) is None]
    assert not missing, f"api.__all__ names what it does not have: {missing}"
