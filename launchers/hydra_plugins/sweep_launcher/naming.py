"""A job's name is what it varies: the overrides whose values differ between the jobs of one multirun, each as
short as it stays clear.

`method.hidden=1000 +sweeps/tiled_w1_arm=t50 problem.seed=44` in a sweep over widths, arms and seeds is named
`hidden=1000 t50 seed=44`: the overrides every job shares (the preset's fixed values) are left out, a key is
named by its last part (its whole name where two varying keys share that part), and an option of a nested
config group (an arm) by its name alone. A name so is read whole where a list or a chart cuts it short. Only the
override lists are needed, so any Hydra app gets the same names: in the per-job console line, the run names and
the failure list.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional, Sequence

_ABSENT = "\0"  # the value of a key a job does not override: a key some jobs lack varies too
# Hydra's sweepers escape these in a job's overrides (`path=x.py\:solve`): a name shows the value as typed
_ESCAPED = re.compile(r"\\([\\()\[\]{}:=, \t])")


def shown(value: str) -> str:
    """A job's override value as the user typed it, without the escapes Hydra's sweeper added (`x.py\\:solve`)."""
    return _ESCAPED.sub(r"\1", value)


def split(override: str) -> tuple[str, str]:
    """`+group/opt=value` -> (`group/opt`, `value`): Hydra's add/force-add/delete prefixes are not part of
    what the job varies."""
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def swept_keys(overrides: Iterable[str]) -> set[str]:
    """Keys the multirun sweeps over (`a=1,2`, `b=range(3)`, `c=interval(0,1)`): known before the first batch,
    so a sweeper that launches in batches names its first batch by every key the sweep varies."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415 - Hydra's override grammar (ANTLR): ~0.2 s, only when a multirun is named

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001 - naming never stops a sweep; the sweeper reports bad overrides itself
        return set()
    return {o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()}


def sweep_overrides(hydra_cfg: Any) -> list[str]:
    """The multirun's own overrides: the command line's and the sweeper's `params` (a preset's sweep)."""
    from omegaconf import DictConfig, OmegaConf  # noqa: PLC0415 - Hydra's own dependency, loaded already

    # as written: an override's value may look like an interpolation (`x=${oops}`), which is the job's to resolve
    plain = OmegaConf.to_container(hydra_cfg, resolve=False) if isinstance(hydra_cfg, DictConfig) else hydra_cfg
    out = [str(o) for o in (plain.get("overrides", {}).get("task") or [])]
    params = (plain.get("sweeper") or {}).get("params") or {}
    return out + [f"{k}={v}" for k, v in params.items()]


def shortened(keys: Sequence[str]) -> dict[str, Optional[str]]:
    """Each key as a name shows it: its last dotted part where no other key of `keys` ends alike; None for an
    option of a nested config group (`sweeps/tiled_w1_arm`), shown by its value alone."""
    last = {k: k.rsplit(".", 1)[-1] for k in keys}
    out: dict[str, Optional[str]] = {}
    for k in keys:
        if "/" in k:
            out[k] = None
        else:
            out[k] = last[k] if sum(v == last[k] for v in last.values()) == 1 else k
    return out


class Namer:
    """Names the jobs of one multirun, batch after batch (a sweeper may launch several): a key varies if the
    sweep's overrides sweep it or once two jobs seen so far disagree on it; a name already given gets the
    job's index."""

    def __init__(self, swept: Iterable[str] = ()) -> None:
        self.swept = set(swept)
        self.values: dict[str, set[str]] = {}  # key -> values seen, in first-seen key order
        self.n_jobs = 0
        self.used: set[str] = set()

    @classmethod
    def for_multirun(cls, hydra_cfg: Any) -> "Namer":
        """The namer of a multirun, from its `hydra` config node (what its overrides sweep)."""
        return cls(swept_keys(sweep_overrides(hydra_cfg)))

    def names(self, job_overrides: Sequence[Sequence[str]], indices: Sequence[int]) -> list[str]:
        parsed = [dict(split(o) for o in overrides) for overrides in job_overrides]
        for job in parsed:
            for key in job:
                self.values.setdefault(key, set() if not self.n_jobs else {_ABSENT})
        for job in parsed:
            for key, seen in self.values.items():
                seen.add(job.get(key, _ABSENT))
        self.n_jobs += len(parsed)
        varying = [k for k, seen in self.values.items() if len(seen) > 1 or k in self.swept]
        short = shortened(varying)
        out = []
        for idx, job in zip(indices, parsed):
            name = " ".join(
                shown(job[k]) if short[k] is None else f"{short[k]}={shown(job[k])}" for k in varying if k in job
            )
            if not name:  # nothing varies (a one-job multirun): all its overrides, or its number
                name = " ".join(f"{k}={shown(v)}" for k, v in job.items()) or f"#{idx}"
            if name in self.used:
                name = f"{name} #{idx}"
            self.used.add(name)
            out.append(name)
        return out
