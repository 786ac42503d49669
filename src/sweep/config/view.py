"""A job's resolved config as plain data, read like a DictConfig (`c.problem.n_bits`, `c.select("a.b")`).

The checks read it: converting the job's groups once costs less than a dozen lookups through OmegaConf, and
the launcher checks every job of a sweep before any starts.
"""

from __future__ import annotations

import functools
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from sweep.config.schema import JOB_GROUPS
from sweep.errors import ConfigError


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


HYDRA_NOT_SET = "HydraConfig was not set"  # a `${hydra:...}` read before Hydra sets the job's own Hydra config
# the top-level keys besides the job's groups that its running and recording read (sweep.config.schema.Config)
RECORDING_KEYS = ("run_name", "batch", "time_limit_s")


def job_config(cfg: "DictConfig | dict[str, Any]") -> dict[str, Any]:
    """The resolved config that defines a job's result (what resume and params compare). `cfg`: the composed
    config, or its top-level keys already resolved (a key still a DictConfig is resolved here).

    `extra` holds user keys such as a preset's `extra.repeat`: they are part of a job's identity, so
    repeats of one config are distinct jobs (and distinct params) rather than one resumed run."""
    try:
        out = {k: _plain(cfg[k]) for k in JOB_GROUPS}
        extra = cfg.get("extra")
        if extra:
            out["extra"] = _plain(extra)
        for key in RECORDING_KEYS:  # read when the job is recorded: `run_name=${oops}` ran the job, then lost its
            _resolvable(cfg, key)  # result (a single run, the basic launcher's jobs) or was a 105-line traceback
    except InterpolationResolutionError as e:  # `${oops}`, a resolver that fails: bad input, one line
        raise ConfigError(unresolved(cfg, e)) from None
    return out


def _resolvable(cfg: "DictConfig | dict[str, Any]", key: str) -> None:
    """Raise where top-level `key` cannot be resolved; a `${hydra:job...}` read before Hydra has set the job's own
    Hydra config (a sweep's plan) is the job's to resolve, where it runs."""
    try:
        if key in cfg:
            cfg[key]  # noqa: B018 - resolved for its error alone (`.get` would name no key in it)
    except InterpolationResolutionError as e:
        if HYDRA_NOT_SET in str(e):
            return
        # named as written, not the key its value reads: a single run's override_dirname holds this override
        # itself, unescaped (a sweep's escapes it), and reads itself for ever
        said = unresolved(cfg, e, key)
        written, _, why = said.partition(" cannot be resolved: ")
        own = "override_dirname" in written and why.startswith("RecursionError")
        fix = f" (leave it out of the name: hydra.job.config.override_dirname.exclude_keys=[{key}])" if own else ""
        raise ConfigError(said + fix) from None


def unresolved(cfg: "DictConfig | dict[str, Any]", e: InterpolationResolutionError, key: str = "") -> str:
    """A value whose interpolation cannot be resolved, in a config error's words: the key (`key`, else the one
    OmegaConf names), its value as written, OmegaConf's reason (its first line)."""
    key = key or str(getattr(e, "full_key", "") or "")
    reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if not key:
        return f"an interpolation cannot be resolved: {reason}"
    written: Any = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, DictConfig) else cfg
    for part in key.split("."):
        written = written.get(part, "?") if isinstance(written, dict) else "?"
    return f"{key}={written} cannot be resolved: {reason}"


def _plain(node: Any) -> Any:
    return node if isinstance(node, (dict, list)) else OmegaConf.to_container(node, resolve=True)
