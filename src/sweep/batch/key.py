"""Which jobs may share a batch: those whose resolved config is equal but for the keys the method class declares it
can vectorise (`vectorised`, dotted keys of the job config: MethodBase). A class with none never batches."""

from __future__ import annotations

import copy
import json
from typing import Any, Optional

from hydra.utils import get_class

from sweep.methods.base import MethodBase


def method_class(config: dict[str, Any]) -> Optional[type[MethodBase]]:
    """The method class a job's `method._target_` names (None: not a method class that imports; the check
    refuses it)."""
    target = (config.get("method") or {}).get("_target_")
    try:
        cls = get_class(str(target))
    except Exception:  # noqa: BLE001 - a function target, or one that fails to import: it runs alone
        return None
    return cls if isinstance(cls, type) and issubclass(cls, MethodBase) else None


def batch_key(config: dict[str, Any]) -> Optional[str]:
    """The job's batch key: its resolved config (`sweep.job.job_config`) without the method class's vectorised
    keys, as text (the class is in it, as method._target_); None: the job runs alone."""
    cls = method_class(config)
    keys = cls.vectorised if cls is not None else ()
    if not keys:
        return None
    rest = copy.deepcopy(config)
    for dotted in keys:
        *parents, leaf = dotted.split(".")
        node: Any = rest
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return json.dumps(rest, sort_keys=True, default=str)
