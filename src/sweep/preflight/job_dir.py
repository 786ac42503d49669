"""Hydra's job directory (`hydra.run.dir`; a sweep's `hydra.sweep.dir`), checked before any job: Hydra makes it
and writes the job's config into it before the job starts, and a directory it cannot make or write (a file of that
name, a read-only or full disk, /proc) was a traceback of 28 to 37 lines from Hydra's `run_job` or its sweeper."""

from __future__ import annotations

import errno
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from sweep.config.view import HYDRA_NOT_SET, unresolved
from sweep.paths import shown
from sweep.preflight.refusal import UNUSABLE, Refusal
from sweep.record.store import probe_writable, special_file


def check_job_dir(config: DictConfig, key: str) -> None:
    """Refuse the directory at `key` (hydra.run.dir, hydra.sweep.dir) when it is not a directory (bad input, exit
    2) or cannot be made and written (exit 1, as a store that cannot be written), and a job name that cannot name
    the job's log file there; nothing is made here."""
    check_job_name(config, sweep=key == "hydra.sweep.dir")
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


NAME_MAX = 255  # the bytes of one file name (Linux, macOS)


def check_job_name(config: DictConfig, sweep: bool) -> None:
    """`hydra.job.name` names the job's log file in its directory (`<name>.log`, Hydra's job_logging): a name with a
    `/` or too long for a file name was logging's traceback ("Unable to configure handler 'file'") before a single
    run, and every job of a sweep failed with it. A `${hydra:...}` name is resolved as a single run's job starts;
    a sweep reads its name before any job has Hydra's config (a traceback)."""
    try:
        name = str(OmegaConf.select(config, "hydra.job.name", default="") or "")
    except InterpolationResolutionError as e:
        if HYDRA_NOT_SET in str(e) and not sweep:
            return
        said = unresolved(config, e, "hydra.job.name")
        why = " (a sweep names its jobs before any has Hydra's config: give a name)" if sweep else ""
        raise Refusal.config_error(said + why) from None
    if "/" in name or len(f"{name}.log".encode()) > NAME_MAX:
        said = shown(name, 60)
        raise Refusal.config_error(
            f"hydra.job.name={said} is not allowed: expected a file name (no '/', at most {NAME_MAX - 4} bytes): "
            "it names the job's log file, <name>.log"
        )
