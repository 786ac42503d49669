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
(`Sweeper.validate_batch_is_legal`) applies each job's values to one working copy per template (see
`load_sweep_config`).
tests/test_launcher.py checks the result equals Hydra's full composition.

Public APIs only (the ConfigLoader and ConfigSource interfaces, Hydra's override parser, OmegaConf); as it
reproduces what Hydra does, it stays a fast path: imported when `launcher.fast_paths` says so (the Hydra
and OmegaConf versions in `launcher.TESTED_HYDRA`/`TESTED_OMEGACONF`, or `hydra.launcher.fast=true`);
`hydra.launcher.fast=false` turns it off.
"""

from __future__ import annotations

import itertools
import pickle
import re
from typing import Any, Optional, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf, flag_override, open_dict, read_write
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException


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
        value overrides is checked by applying its values (Hydra's errors) to one working copy of its template's
        task part, kept per template: a tenth of a whole job's cost, and that copy, valid until the next call, is
        what comes back. The launcher's check pass composes every job whole before any starts, so a job this lets
        through (a value a previous job's dict merge made room for) is refused there with the same error.
        Anything else: Hydra's full path."""
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

    def hydra_doc(self, template_id: int) -> dict[str, Any]:
        """The template's {hydra: ...} section as plain data (unresolved, as `.hydra/hydra.yaml` writes it).
        A job made from the template differs from it only in `_run_job.PER_JOB_KEYS`: value
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
        its template, what a worker makes the job's config from (`_template`)."""
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
        if hit is None:
            if len(self.parsed) > 100_000:
                self.parsed.clear()
            o = self.parser.parse_overrides([line])[0]
            hit = self.parsed[line] = (o, self._is_value(o))
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
                try:
                    apply_values(values, scratch)
                    return scratch, self.template_ids[tkey]
                except ConfigCompositionException:
                    pass  # refused only where a fresh copy refuses it too
            scratch = self.scratch[tkey] = pickle.loads(self.task_templates[tkey])
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
