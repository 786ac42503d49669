"""Composing a sweep's jobs in milliseconds, with Hydra's own composition.

Hydra composes every job twice (the sweeper checks each job of a batch, then the launcher composes it) and
each composition re-reads every config file: ~0.1-0.5 s a job on a 2-core machine, far above the launcher's
per-job budget. Jobs of a typical sweep differ only in plain values (`problem.seed=3`), so `FastComposer`
composes each distinct set of *group* choices once with Hydra's `load_sweep_config`, then makes a job by
copying that config and applying the job's value overrides as Hydra's composition applies them (OmegaConf's
`update`, Hydra's errors), and fills in `hydra.overrides.task` and `hydra.job.override_dirname` as Hydra does.
Anything else (group choices, `+`/`++`/`~`, `hydra.*` keys, packages) takes Hydra's full path. Nothing composed
is kept: the launcher composes a job when it needs it (its check, then just before it goes to a worker), so
memory stays flat in the grid's size. The sweeper's check that every job composes
(`Sweeper.validate_batch_is_legal`) sets each job's values on one working copy per template, and the launcher's
check pass composes the jobs of one shape (template and value keys) on one working config, with the template's
task part resolved once (`Shape`, `_fast/in_place`): a few tens of µs a job, so a 50,000-job grid starts in seconds.
A grid's numbers (`problem.seed=N`) skip Hydra's grammar once one line of their key went through it.
tests/test_launcher.py and tests/test_check_pass.py check the results equal Hydra's full composition.

Public APIs (the ConfigLoader and ConfigSource interfaces, Hydra's override parser, OmegaConf), but for the values
set in place (`_fast/in_place.py`: OmegaConf's node internals, as its own assignment uses them); as it reproduces what
Hydra and OmegaConf do, it stays a fast path: imported when `_fast.fast_paths` says so (the Hydra
and OmegaConf versions in `_fast.TESTED_HYDRA`/`TESTED_OMEGACONF`, or `hydra.launcher.fast=true`);
`hydra.launcher.fast=false` turns it off.
"""

from __future__ import annotations

import itertools
import marshal
import pickle
import re
from typing import Any, Optional, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf, flag_override, open_dict, read_write
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException
from omegaconf.nodes import ValueNode

from hydra_plugins.sweep_launcher._fast.in_place import independent_keys, is_plain, value_node

# `key=<int or decimal>` as Hydra's grammar reads it (no underscores, exponents, signs but `-`, or leading zeros)
_NUMBER_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(-?(?:0|[1-9][0-9]*)(\.[0-9]+)?)\Z")
# the hydra keys a job of a template sets for itself: an interpolation that reads one differs per job
PER_JOB_HYDRA = (
    ("hydra", "job", "id"),
    ("hydra", "job", "num"),
    ("hydra", "job", "override_dirname"),
    ("hydra", "overrides", "task"),
)


def apply_values(values: Sequence[Override], cfg: DictConfig) -> None:
    """Plain `key=value` overrides applied as Hydra's composition applies them, with its error messages."""
    apply_plain([(o.key_or_group, o.value(), o.input_line) for o in values], cfg)


def apply_plain(values: Sequence[tuple[str, Any, str]], cfg: DictConfig) -> None:
    """`apply_values` of overrides already parsed: (key, value, the override as written)."""
    for key, value, line in values:
        try:
            OmegaConf.update(cfg, key, value, merge=True)
        except (ConfigAttributeError, ConfigKeyError) as ex:
            raise ConfigCompositionException(
                f"Could not override '{key}'.\nTo append to your config use +{line}"
            ) from ex
        except OmegaConfBaseException as ex:
            raise ConfigCompositionException(f"Error merging override {line}") from ex


def overrides_dirname(overrides: Sequence[Override], exclude_keys: Sequence[str], item_sep: str, kv_sep: str) -> str:
    """`hydra.job.override_dirname` as Hydra writes it: the overrides not excluded, sorted, joined."""
    lines = sorted(str(o.input_line) for o in overrides if o.key_or_group not in exclude_keys)
    return re.sub("[=]", kv_sep, item_sep.join(lines))


def set_in_place(values: Sequence[Override], nodes: dict[str, Optional[ValueNode]], cfg: DictConfig) -> bool:
    """Plain values set on `cfg` as `apply_values` sets them (`_fast/in_place`), through the value nodes found so far
    (`nodes`, kept with `cfg`). False: a value this does not take, or one its node refuses (`cfg` may then hold
    some of the values: apply them all again through `apply_values`, for Hydra's error)."""
    for o in values:
        v = o.value()
        if not is_plain(v):
            return False
        key = o.key_or_group
        node = nodes[key] if key in nodes else nodes.setdefault(key, value_node(cfg, key))
        if node is None:
            return False
        try:
            node._set_value(v)
        except Exception:  # noqa: BLE001 - refused: apply_values raises Hydra's error for it
            return False
    return True


class Shape:
    """The jobs of one template whose lines differ only in the values of the same keys, in the same order: one
    working config (the first job's, composed whole), each job's values and its own hydra keys set in place, and
    the template's task part resolved once as plain data where no interpolation reads the values
    (`_fast/in_place`)."""

    def __init__(self, cfg: DictConfig, lines: Sequence[tuple[Override, bool]], template: int) -> None:
        self.cfg, self.template = cfg, template
        self.nodes: dict[str, Optional[ValueNode]] = {}
        self.at = [i for i, (_, is_value) in enumerate(lines) if is_value]  # the value lines' positions
        hydra = cfg.hydra
        self.task = [hydra.overrides.task._get_node(i) for i in self.at]
        self.dirname = hydra.job._get_node("override_dirname")
        self.id, self.num = hydra.job._get_node("id"), hydra.job._get_node("num")
        self.stores = all(_stores(n, "s") for n in (*self.task, self.dirname, self.id)) and _stores(self.num, 0)
        d = hydra.job.config.override_dirname
        self.dirname_of = (list(d.exclude_keys), str(d.item_sep), str(d.kv_sep))
        varied = [tuple(str(lines[i][0].key_or_group).split(".")) for i in self.at]
        top = [str(k) for k in cfg if k != "hydra"]
        keep = independent_keys(cfg, [*varied, *PER_JOB_HYDRA], top)
        self.base: Optional[bytes] = None
        self.paths = [(p[:-1], p[-1]) if p[0] in keep else None for p in varied]
        try:
            self.base = marshal.dumps({k: _resolved(cfg, k) for k in top if k in keep})
        except Exception:  # noqa: BLE001 - not plain data (an enum), or a key that does not resolve: per job
            self.base = None

    def take(self, lines: Sequence[tuple[Override, bool]], job_id: str, num: int) -> Optional[tuple]:
        """(config, template id, resolved task part or None) of a job of this shape; None: a value its node refuses
        (the job takes the usual path, and its error)."""
        values = [lines[i][0] for i in self.at]
        if not set_in_place(values, self.nodes, self.cfg):
            return None
        for node, o in zip(self.task, values):
            _store(node, o.input_line)
        exclude, item_sep, kv_sep = self.dirname_of
        _store(self.dirname, overrides_dirname([o for o, _ in lines], exclude, item_sep, kv_sep))
        _store(self.id, job_id)
        _store(self.num, num)
        resolved = None
        if self.base is not None:
            resolved = marshal.loads(self.base)
            for where, o in zip(self.paths, values):
                if where is not None:
                    d = resolved
                    for part in where[0]:
                        d = d[part]
                    d[where[1]] = self.nodes[o.key_or_group]._value()  # type: ignore[union-attr]
        return self.cfg, self.template, resolved


def _stores(node: Any, sample: Any) -> bool:
    """Does `node` keep a value of `sample`'s type as it is (a string or integer node, or an untyped one)?"""
    return isinstance(node, ValueNode) and type(node.validate_and_convert(sample)) is type(sample)


def _store(node: ValueNode, value: Any) -> None:
    """A job's own hydra key (`Shape.stores`: its node keeps the value as it is), set under the section's read-only
    flag without lifting it: lifting it re-reads the flags of the whole section, twice a job."""
    node.__dict__["_val"] = value


def _resolved(cfg: DictConfig, key: str) -> Any:
    value = cfg[key]
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


_template_ids = itertools.count(1)  # unique in the process: workers cache hydra sections by id


def _plain_loader(loader: Any) -> Any:
    return loader


class FastComposer:
    """Stands in for Hydra's ConfigLoader in the HydraContext; every other call goes to the real one."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.parser = OverridesParser.create(config_loader=loader)
        # pickled: loads() copies ~6x faster than deepcopy
        self.templates: dict[tuple[int, tuple[str, ...]], bytes] = {}
        self.template_ids: dict[tuple[int, tuple[str, ...]], int] = {}
        self.template_keys: dict[int, tuple[int, tuple[str, ...]]] = {}  # id -> key
        self.task_templates: dict[tuple[int, tuple[str, ...]], bytes] = {}  # the same without the hydra section
        self.hydra_docs: dict[int, dict[str, Any]] = {}  # template id -> its hydra section as plain data
        self.shared_hydra: dict[tuple[int, tuple[str, ...]], DictConfig] = {}  # take_in_turn's sections
        self.scratch: dict[tuple[int, tuple[str, ...]], DictConfig] = {}  # load_sweep_config's working copies
        # Hydra's grammar is slow and most jobs repeat most overrides: line -> (parsed, is a plain value)
        self.parsed: dict[str, tuple[Override, bool]] = {}
        # a key's `key=<number>` line, as Hydra parsed one: a grid's other numbers for it need no grammar
        self.numbers: dict[str, tuple[Override, bool]] = {}
        self.scratch_nodes: dict[tuple[int, tuple[str, ...]], dict[str, Optional[ValueNode]]] = {}
        self.shapes: dict[tuple[int, tuple[str, ...]], Optional[Shape]] = {}  # take_planned's; None: not one

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def __reduce__(self) -> Any:  # workers get Hydra's plain loader, without the caches
        return (_plain_loader, (self.loader,))

    def _is_value(self, o: Override) -> bool:
        key = o.key_or_group
        return (
            o.package is None
            and not (o.is_delete() or o.is_add() or o.is_force_add())
            and not o.is_sweep_override()
            and not o.is_hydra_override()
            and not key.startswith("hydra")
            and not any(s.is_group(key.replace(".", "/")) for s in self.loader.get_sources())
        )

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: Sequence[str]) -> DictConfig:
        """In the launching process only sweepers call this, to check that each job of a batch composes
        (`validate_batch_is_legal`, which drops the result); the launcher composes through `take`. A job of
        value overrides is checked by setting its values (`set_in_place`; else OmegaConf's update, Hydra's errors)
        on one working copy of its template's task part, kept per template: a few µs a job, and that copy, valid
        until the next call, is what comes back. The launcher's check pass composes every job before any starts
        (`take_planned`: its shape's first job whole), so a job this lets through (a value a previous job's dict
        merge made room for) is refused there with the same error. Anything else: Hydra's full path."""
        return self._compose(master_config, list(sweep_overrides), task_only=True)[0]

    def take(self, master_config: DictConfig, sweep_overrides: Sequence[str]) -> tuple[DictConfig, Optional[int]]:
        """The launcher's composition of a job, and the id of the template it was made from (None: Hydra's
        full composition). Nothing is kept: each call composes afresh."""
        return self._compose(master_config, list(sweep_overrides))

    def take_in_turn(
        self, master_config: DictConfig, sweep_overrides: Sequence[str]
    ) -> tuple[DictConfig, Optional[int]]:
        """`take` for a stream that looks at one job at a time (the launcher's check pass): a job made from a
        template gets the template's one hydra section, its own keys set in place, so only the task part is
        copied (a fifth of the cost). The section is the next job's once this is called again: a job's config is
        valid until then."""
        return self._compose(master_config, list(sweep_overrides), shared_hydra=True)

    def take_planned(
        self, master: DictConfig, sweep_overrides: Sequence[str], job_id: str, num: int
    ) -> Optional[tuple[DictConfig, int, Optional[dict[str, Any]]]]:
        """The check pass's composition of a job of value overrides (`Shape`): (its config, with hydra.job.id and
        num, valid until the next call; the template's id; its task part resolved as plain data, the keys
        whose interpolations read the job's values left out, or None). None: not such a job, or a value its node
        refuses: compose it the usual way (`take_in_turn`)."""
        lines = [self._parse(line) for line in sweep_overrides]
        shape_key = (id(master), tuple(o.key_or_group if v else o.input_line for o, v in lines))
        shape = self.shapes.get(shape_key, False)
        if shape is False:
            if len(self.shapes) >= 256:  # a sweep whose jobs each have their own shape: each job composed whole
                self.shapes.clear()
            shape = self.shapes[shape_key] = self._shape(master, sweep_overrides, lines, job_id, num)
        return None if shape is None else shape.take(lines, job_id, num)

    def _shape(
        self, master: DictConfig, overrides: Sequence[str], lines: list[tuple[Override, bool]], job_id: str, num: int
    ) -> Optional[Shape]:
        if not any(v for _, v in lines):
            return None
        cfg, template = self._compose(master, list(overrides))  # Hydra's error for a job that does not compose
        assert template is not None
        with read_write(cfg.hydra), open_dict(cfg.hydra):
            cfg.hydra.job.id, cfg.hydra.job.num = job_id, num
        shape = Shape(cfg, lines, template)
        if not shape.stores:
            return None
        for o, v in lines:
            if v and shape.nodes.setdefault(o.key_or_group, value_node(cfg, o.key_or_group)) is None:
                return None  # a key OmegaConf's assignment would not simply set: every job of the shape composes whole
        return shape

    def hydra_doc(self, template_id: int) -> dict[str, Any]:
        """The template's {hydra: ...} section as plain data (unresolved, as `.hydra/hydra.yaml` writes it).
        A job made from the template differs from it only in `_fast/run_job.PER_JOB_KEYS`: value
        overrides never touch `hydra.*` (those take Hydra's full path)."""
        doc = self.hydra_docs.get(template_id)
        if doc is None:
            cfg = pickle.loads(self.templates[self.template_keys[template_id]])
            doc = self.hydra_docs[template_id] = OmegaConf.to_container(
                OmegaConf.masked_copy(cfg, "hydra"), resolve=False, enum_to_str=True
            )
        return doc

    def given(self, overrides: Sequence[str]) -> tuple[list[tuple[str, str]], list[tuple[str, Any, str]]]:
        """A job's overrides as (key or group, as written), and its plain values as (key, value, as written): with
        its template, what a worker makes the job's config from (`_fast/template`)."""
        hits = [self._parse(line) for line in overrides]
        return [(o.key_or_group, o.input_line) for o, _ in hits], [
            (o.key_or_group, o.value(), o.input_line) for o, is_value in hits if is_value
        ]

    def pickled(self, template_id: int) -> tuple[bytes, bytes]:
        """The template as this composer holds it: (the whole config, its task part), pickled."""
        key = self.template_keys[template_id]
        return self.templates[key], self.task_templates[key]

    def _parse(self, line: str) -> tuple[Override, bool]:
        hit = self.parsed.get(line)
        if hit is not None:
            return hit
        m = _NUMBER_LINE.match(line)
        known = self.numbers.get(m.group(1)) if m else None
        if known is not None:  # what Hydra's parser makes of it: the same override with this number
            o = object.__new__(Override)  # a copy of it (copy.copy takes three times as long)
            o.__dict__.update(known[0].__dict__)
            o._value, o.input_line = (float if m.group(3) else int)(m.group(2)), line  # type: ignore[union-attr]
            return o, known[1]
        if len(self.parsed) > 100_000:
            self.parsed.clear()
        o = self.parser.parse_overrides([line])[0]
        hit = self.parsed[line] = (o, self._is_value(o))
        if m and o.key_or_group == m.group(1) and type(o._value) is (float if m.group(3) else int):
            self.numbers[o.key_or_group] = hit
        return hit

    def _compose(
        self, master: DictConfig, overrides: list[str], task_only: bool = False, shared_hydra: bool = False
    ) -> tuple[DictConfig, Optional[int]]:
        hits = [self._parse(line) for line in overrides]
        parsed = [o for o, _ in hits]
        values = [o for o, is_value in hits if is_value]
        if not values:
            return self.loader.load_sweep_config(master, overrides), None
        groups = [o.input_line for o, is_value in hits if not is_value]
        tkey = (id(master), tuple(groups))
        template: Optional[bytes] = self.templates.get(tkey)
        if template is None:
            whole = self.loader.load_sweep_config(master, groups)
            template = self.templates[tkey] = pickle.dumps(whole)
            task = OmegaConf.masked_copy(whole, [k for k in whole if k != "hydra"])
            OmegaConf.set_struct(task, bool(OmegaConf.is_struct(whole)))  # a new key is refused as in the whole
            self.task_templates[tkey] = pickle.dumps(task)
            self.template_ids[tkey] = next(_template_ids)
            self.template_keys[self.template_ids[tkey]] = tkey
        if task_only:
            scratch = self.scratch.get(tkey)
            if scratch is not None:
                if set_in_place(values, self.scratch_nodes[tkey], scratch):
                    return scratch, self.template_ids[tkey]
                self.scratch_nodes[tkey] = {}  # OmegaConf's assignment may replace nodes
                try:
                    apply_values(values, scratch)
                    return scratch, self.template_ids[tkey]
                except ConfigCompositionException:
                    pass  # refused only where a fresh copy refuses it too
            scratch = self.scratch[tkey] = pickle.loads(self.task_templates[tkey])
            self.scratch_nodes[tkey] = {}
            apply_values(values, scratch)
            return scratch, self.template_ids[tkey]
        if shared_hydra:
            cfg = pickle.loads(self.task_templates[tkey])
            apply_values(values, cfg)
            hydra = self.shared_hydra.get(tkey)
            if hydra is None:
                hydra = self.shared_hydra[tkey] = pickle.loads(template).hydra
            with flag_override(cfg, ["no_deepcopy_set_nodes", "struct"], [True, False]):
                cfg["hydra"] = hydra  # not copied: it now belongs to this job
        else:
            cfg = pickle.loads(template)
            apply_values(values, cfg)
        with read_write(cfg.hydra), open_dict(cfg.hydra):
            cfg.hydra.overrides.task = [o.input_line for o in parsed]
            dirname = cfg.hydra.job.config.override_dirname
            cfg.hydra.job.override_dirname = overrides_dirname(
                parsed, exclude_keys=list(dirname.exclude_keys), item_sep=dirname.item_sep, kv_sep=dirname.kv_sep
            )
        OmegaConf.copy_cache(from_config=master, to_config=cfg)
        return cfg, self.template_ids[tkey]
