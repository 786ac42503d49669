"""Hydra's job directory (`hydra.run.dir`; a sweep's `hydra.sweep.dir`), checked before any job: Hydra makes it
and writes the job's config into it before the job starts, and a directory it cannot make or write (a file of that
name, a read-only or full disk, /proc) was a traceback of 28 to 37 lines from Hydra's `run_job` or its sweeper."""

from __future__ import annotations

import errno
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from sweep.config.view import unresolved
from sweep.preflight.refusal import UNUSABLE, Refusal
from sweep.record.store import probe_writable, special_file


def check_job_dir(config: DictConfig, key: str) -> None:
    """Refuse the directory at `key` (hydra.run.dir, hydra.sweep.dir) when it is not a directory (bad input, exit
    2) or cannot be made and written (exit 1, as a store that cannot be written); nothing is made here."""
    try:
        path = Path(str(OmegaConf.select(config, key)))
    except InterpolationResolutionError as e:  # hydra.run.dir=${oops}: as any key's, one line
        raise Refusal.config_error(unresolved(config, e, key)) from None
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        kind = special_file(existing) or "a file"
        raise Refusal.config_error(
            f"{key}={path} is not allowed: {existing} is {kind}: expected a directory (Hydra's job directory, "
            f"made where it is not there)"
        )
    try:
        probe_writable(existing)
    except OSError as e:
        why = "full" if e.errno in (errno.ENOSPC, errno.EDQUOT) else "cannot be written"
        raise Refusal(
            f"{key}={path}: {existing} {why} ({e.strerror}): Hydra's job directory must be a directory you can "
            f"write (set {key}=DIR)",
            UNUSABLE,
        ) from None
