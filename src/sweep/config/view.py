"""A job's resolved config as plain data, read like a DictConfig (`c.problem.n_bits`, `c.select("a.b")`).

The checks read it: converting the job's groups once costs less than a dozen lookups through OmegaConf, and
the launcher checks every job of a sweep before any starts.
"""

from __future__ import annotations

import functools
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sweep.config.schema import JOB_GROUPS


@functools.lru_cache(maxsize=1024)
def _parts(dotted: str) -> tuple[str, ...]:
    """A dotted key's parts: the checks select the same few dozen keys from every job of a sweep."""
    return tuple(dotted.split("."))


class ConfigView(dict):
    """Plain nested dicts with attribute access (`c.method.lr`) and dotted lookup (`c.select("method.lr")`)."""

    def __getattr__(self, key: str) -> Any:
        try:
            value = self[key]
        except KeyError:
            raise AttributeError(key) from None
        return ConfigView(value) if isinstance(value, dict) else value

    def select(self, dotted: str, default: Any = None) -> Any:
        node: Any = self
        for part in _parts(dotted):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @classmethod
    def of(cls, cfg: "DictConfig | dict[str, Any]") -> "ConfigView":
        """The job groups of `cfg`, resolved (a plain dict, e.g. sweep.job.job_config's, is taken as it is)."""
        if isinstance(cfg, ConfigView):
            return cfg
        if isinstance(cfg, dict):
            return cls(cfg)
        return cls({k: OmegaConf.to_container(cfg[k], resolve=True) for k in JOB_GROUPS if k in cfg})
