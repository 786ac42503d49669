"""A job's plain values set in place on a composed config, as OmegaConf's `update` sets them, in microseconds; and
which parts of a template resolve alike for every job that differs from it only in such values.

The check pass looks at every job of a grid before any starts: at 50,000 jobs it has ~100 µs a job. Jobs of a
grid share a *shape*: one template (group choices) and the same value keys in the same order (`problem.seed=N`).
For a shape the launcher keeps one working config and, per job, sets each value on the leaf node it replaces with
that node's own `_set_value` (validation and conversion included): what `OmegaConf.update` does for a primitive
assigned to an existing value node with a type (or an untyped one), once the path to it is plain dicts
(`value_node` says when). Every job of the shape sets every key of the shape, so the working config is always the
template plus the current job's values.

The job's resolved task config as plain data is then the template's, resolved once, with the job's values put in:
valid for each top-level key whose interpolations read none of the values (`independent_keys`). A reference
(`${a.b}`, `${..x}`, within a string too) reads what it names; any other interpolation (a resolver's) might read
anything, so the keys holding one resolve per job, as Hydra does.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, Optional

from omegaconf import DictConfig, ListConfig, Node
from omegaconf.nodes import AnyNode, ValueNode

# a reference to a key, absolute or relative (each leading dot beyond the first: one level up)
_REFERENCE = re.compile(r"\$\{(\.*)([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)\}")
Path = tuple[str, ...]


def is_plain(value: Any) -> bool:
    """A value `_set_value` takes as OmegaConf's assignment does (no interpolation, no missing marker, no None:
    those take other branches of the assignment)."""
    t = type(value)
    return (
        t is int or t is float or t is bool or (t is str and "$" not in value and "\\" not in value and value != "???")
    )


def value_node(cfg: DictConfig, key: str) -> Optional[ValueNode]:
    """The value node `key` names, where assigning a plain value to it is `_set_value` on it: every node on the way
    a plain dict (no interpolation, not missing, not None), the last one writable, the leaf a value node with a type
    or an untyped one. None: anything else (OmegaConf's assignment would wrap, replace or refuse)."""
    node: Node = cfg
    *parents, leaf = key.split(".")
    try:
        for part in parents:
            node = node._get_node(part)  # type: ignore[assignment]
            if not isinstance(node, DictConfig) or node._is_interpolation() or node._is_missing() or node._is_none():
                return None
        if node._get_flag("readonly"):
            return None
        target = node._get_node(leaf)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - a key struct mode refuses: OmegaConf's assignment raises its own error
        return None
    if isinstance(target, ValueNode) and (target._has_ref_type() or isinstance(target, AnyNode)):
        return target
    return None


def interpolations(node: Node, path: Path = ()) -> Iterator[tuple[Path, str]]:
    """Every interpolation under `node`: (its path, its text)."""
    if node._is_interpolation():
        yield path, str(node._value())
        return
    content = node.__dict__.get("_content")
    if isinstance(node, DictConfig) and isinstance(content, dict):
        for k, child in content.items():
            yield from interpolations(child, (*path, str(k)))
    elif isinstance(node, ListConfig) and isinstance(content, list):
        for i, child in enumerate(content):
            yield from interpolations(child, (*path, str(i)))


def references(path: Path, text: str) -> Optional[list[Path]]:
    """The absolute paths an interpolation at `path` reads; None: it may read anything (a resolver, an escape)."""
    if "\\" in text:
        return None
    found: list[Path] = []
    parent = path[:-1]
    for m in _REFERENCE.finditer(text):
        dots, key = len(m.group(1)), tuple(m.group(2).split("."))
        if dots == 0:
            found.append(key)
        elif dots - 1 <= len(parent):
            found.append(parent[: len(parent) - (dots - 1)] + key)
        else:
            return None
    return None if "${" in _REFERENCE.sub("", text) else found


def _overlap(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def independent_keys(cfg: DictConfig, varied: Iterable[Path], top: Iterable[str]) -> set[str]:
    """The keys of `top` (top-level keys of `cfg`) whose resolution reads none of the `varied` paths: no
    interpolation under them reads a varied path, a node that contains one or is under one, or another
    interpolation that does (transitively), and none is a resolver's."""
    found = [(p, references(p, text)) for p, text in interpolations(cfg)]
    dependent: list[Path] = list(varied)
    tainted: set[Path] = set()
    grew = True
    while grew:
        grew = False
        for p, refs in found:
            if p not in tainted and (refs is None or any(_overlap(r, d) for r in refs for d in dependent)):
                tainted.add(p)
                dependent.append(p)
                grew = True
    return {k for k in top if not any(p[:1] == (k,) for p in tainted)}
