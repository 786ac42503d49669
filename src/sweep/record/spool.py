"""The spool: results that could not be written into their store, kept on local disk until they can be.

A job's result is never lost to a store that refuses it (read-only, corrupt, locked, an experiment name MLflow
rejects): the recorder writes the RunResult here as one JSON file, with the store and experiment it was meant
for, and the command fails with one line naming the store, the cause and the spool file. The next recorder
opened on that store writes the spooled results in (oldest first) and removes their files; or explicitly:

    sweep-spool list                  # what is waiting, for which store
    sweep-spool import [--tracking-uri URI]      (the command line: sweep/spool.py; or python -m sweep.spool)

The spool is `<project>/outputs/spool/` (`$SWEEP_SPOOL_DIR` moves it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Optional

from hydra_plugins.sweep_launcher.commands import command
from sweep.paths import PROJECT_ROOT
from sweep.record.store import absolute_uri
from sweep.result import RunResult


def kept(path: Path) -> str:
    """How a command that could not record names the spool file, and what writes it in."""
    return f"the result is kept in {path} ({command('sweep.spool', 'import')} writes it in)"


def spool_dir() -> Path:

    return Path(os.environ.get("SWEEP_SPOOL_DIR") or PROJECT_ROOT / "outputs" / "spool")


@dataclasses.dataclass
class Entry:
    path: Path
    tracking_uri: str
    experiment: str
    result: RunResult
    parent_run_id: Optional[str] = None
    run_name: Optional[str] = None
    extra_tags: Optional[dict[str, str]] = None
    cause: str = ""


def keep(
    result: RunResult,
    tracking_uri: str,
    experiment: str,
    cause: str,
    parent_run_id: Optional[str] = None,
    run_name: Optional[str] = None,
    extra_tags: Optional[dict[str, str]] = None,
) -> Path:
    """Write `result` to the spool (atomically: a spool file is complete or absent); returns its path."""
    d = spool_dir()
    d.mkdir(parents=True, exist_ok=True)
    doc = {
        "tracking_uri": absolute_uri(tracking_uri),  # the store meant, whichever directory imports it
        "experiment": experiment,
        "parent_run_id": parent_run_id,
        "run_name": run_name,
        "extra_tags": extra_tags,
        "cause": cause,
        "spooled_at": time.time(),
        "result": dataclasses.asdict(result),
    }
    path = d / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, default=str))
    os.replace(tmp, path)
    return path


def entries(tracking_uri: Optional[str] = None) -> list[Entry]:
    """Spooled results (for `tracking_uri` only, if given), oldest first."""
    d = spool_dir()
    if not d.is_dir():
        return []
    out = []
    for p in sorted(d.glob("*.json")):
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError):
            continue  # not ours, or being written by another process
        if tracking_uri is not None and absolute_uri(doc.get("tracking_uri", "")) != absolute_uri(tracking_uri):
            continue
        res = doc["result"]
        out.append(
            Entry(
                path=p,
                tracking_uri=doc["tracking_uri"],
                experiment=doc["experiment"],
                result=RunResult(**res),
                parent_run_id=doc.get("parent_run_id"),
                run_name=doc.get("run_name"),
                extra_tags=doc.get("extra_tags"),
                cause=doc.get("cause", ""),
            )
        )
    return out


def import_into(recorder: Any) -> int:
    """Write the spooled results meant for `recorder`'s store into it (each into its own experiment), remove
    their files; returns how many were written. A result that fails again stays in the spool."""
    todo = entries(recorder.tracking_uri)
    by_experiment: dict[str, Any] = {}
    n = 0
    for e in todo:
        claimed = e.path.with_name(f"{e.path.name}.{os.getpid()}.claimed")
        try:
            os.rename(e.path, claimed)  # atomic: a second process importing at once skips this one
        except FileNotFoundError:
            continue
        try:
            rec = recorder if e.experiment == recorder.experiment else by_experiment.get(e.experiment)
            if rec is None:
                rec = by_experiment[e.experiment] = type(recorder)(
                    recorder.tracking_uri, e.experiment, import_spool=False
                )
            rec.write(e.result, e.parent_run_id, e.run_name, e.extra_tags)
        except Exception as err:  # noqa: BLE001 - this one stays for a later import; the rest and the caller go on
            os.rename(claimed, e.path)
            print(
                f"sweep: spooled result {e.path} not written ({err}); it stays in the spool",
                file=sys.stderr,
                flush=True,
            )
            continue
        except BaseException:
            os.rename(claimed, e.path)
            raise
        claimed.unlink()
        n += 1
    return n
