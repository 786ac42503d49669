"""A job's config made in the local worker from its template and its values, instead of pickled whole per job.

The launcher composes a sweep's jobs from a few templates (`_fast/compose.FastComposer`: one per set of group choices),
and a job differs from its template only in its plain value overrides and in the keys set per job
(`_fast/run_job.PER_JOB_KEYS`). Composing and pickling each whole config in the launching process was most of that
process's time per job; so a worker gets each template once (pickled, as the composer holds it) and then each job
as a `_core.Spec`, and makes the job's config as `FastComposer.take_in_turn` does: a copy of the template's task
part with the job's values applied, holding the template's one hydra section with the job's own keys set in place
(a worker runs one job at a time). tests/test_dispatch_configs.py checks it equals the launcher's composition.
Fast path only, as `_fast/run_job`.
"""

from __future__ import annotations

import pickle
from typing import Any, NamedTuple, Optional

from omegaconf import DictConfig, OmegaConf, flag_override, open_dict, read_write

from hydra_plugins.sweep_launcher._core import Spec
from hydra_plugins.sweep_launcher._fast.compose import apply_plain, overrides_dirname
from hydra_plugins.sweep_launcher._fast.run_job import HydraYaml
from hydra_plugins.sweep_launcher._jobs import job_id


class _Given(NamedTuple):
    """An override as `overrides_dirname` reads it."""

    key_or_group: str
    input_line: str


class Template:
    """A template as a worker keeps it: its hydra.yaml (`HydraYaml`), its task part and its hydra section."""

    def __init__(self, hydra_doc: dict[str, Any], whole: bytes, task: bytes) -> None:
        self.yaml = HydraYaml(hydra_doc)
        self.whole, self.task_bytes = whole, task
        self.hydra: Optional[DictConfig] = None  # loaded at its first job

    def task(self, spec: Spec) -> DictConfig:
        """The job's task config: the template's task part with the job's values (Hydra's errors)."""
        cfg: DictConfig = pickle.loads(self.task_bytes)
        apply_plain(spec.values, cfg)
        OmegaConf.set_cache(cfg, spec.cache)
        return cfg

    def config(self, spec: Spec) -> DictConfig:
        """The job's whole config; its hydra section is the template's, the job's until the next job's is made."""
        cfg = self.task(spec)
        if self.hydra is None:
            self.hydra = pickle.loads(self.whole).hydra
        with flag_override(cfg, ["no_deepcopy_set_nodes", "struct"], [True, False]):
            cfg["hydra"] = self.hydra
        with read_write(cfg.hydra), open_dict(cfg.hydra):
            cfg.hydra.overrides.task = [line for _, line in spec.overrides]
            dirname = cfg.hydra.job.config.override_dirname
            cfg.hydra.job.override_dirname = overrides_dirname(
                [_Given(*o) for o in spec.overrides],
                exclude_keys=list(dirname.exclude_keys),
                item_sep=dirname.item_sep,
                kv_sep=dirname.kv_sep,
            )
            cfg.hydra.job.id = job_id(str(cfg.hydra.job.name), spec.num)
            cfg.hydra.job.num = spec.num
        return cfg

    def made(self, spec: Spec) -> "Made":
        return Made(self, spec)


class Made:
    """A job's config source (as `_core.Pickled` is) made from its template."""

    def __init__(self, template: Template, spec: Spec) -> None:
        self.template, self.spec = template, spec

    def config(self) -> DictConfig:
        return self.template.config(self.spec)

    def task(self) -> DictConfig:
        return self.template.task(self.spec)

    def overrides(self) -> list[str]:
        return [line for _, line in self.spec.overrides]
