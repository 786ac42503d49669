"""The spool: results that could not be written into their store, kept on local disk until they can be.

A job's result is never lost to a store that refuses it (read-only, corrupt, locked, an experiment name MLflow
rejects): the recorder writes the RunResult here as one JSON file, with the store and experiment it was meant
for, and the command fails with one line naming the store, the cause and the spool file. The next recorder
opened on that store writes the spooled results in (oldest first) and removes their files; or explicitly:

    sweep-spool list                  # what is waiting, for which store
    sweep-spool import [--tracking-uri URI]      (the command line: sweep/spool.py; or python -m sweep.spool)

The spool is `<project>/outputs/spool/` (`$SWEEP_SPOOL_DIR` moves it). When the spool cannot take a result
either (the disk that holds store and spool is full, both read-only), it goes to the last resort, a directory of
this user's under the system's temporary directory (`last_resort_dir`, shared by every checkout and spool of
this user), which import reads too, taking only the results meant for its own spool (each file names the spool
that could not take it: another checkout's results are that checkout's to import); if even that fails, the
result is printed on stdout as the JSON a spool file holds. Either way the command fails with one line naming the
store, the spool, the causes and where the result is.

A sweep's parent run whose closing write the store refuses (a full disk) is kept the same way (`keep_end`): its
status, totals and the cause; the import closes it FAILED with the cause in ENDED_REASON_TAG, where the next sweep
would otherwise find it RUNNING and call its launcher killed (`sweep.record.abandoned`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra_plugins.sweep_launcher.api import command
from sweep.paths import PROJECT_ROOT
from sweep.record.abandoned import alive, proc_start
from sweep.record.background import signals_held
from sweep.record.store import absolute_uri
from sweep.result import RunResult

DEFAULT_SPOOL = PROJECT_ROOT / "outputs" / "spool"


def kept(path: Path, what: str = "result") -> str:
    """How a command that could not record names the spool file, and what writes it in."""
    return f"the {what} is kept in {path} ({command('sweep.spool', 'import')} writes it in)"


def spool_dir() -> Path:
    return Path(os.environ.get("SWEEP_SPOOL_DIR") or DEFAULT_SPOOL)


def last_resort_dir() -> Path:
    """Where a result goes when the spool cannot take it: this user's directory under the system's temporary
    directory (`$TMPDIR`), most often another disk than the project's (which holds both store and spool)."""
    return Path(tempfile.gettempdir()) / f"sweep-unrecorded-{os.getuid()}"


@dataclasses.dataclass
class Entry:
    path: Path
    tracking_uri: str
    experiment: str
    result: Optional[RunResult]  # None for a parent run's end (`end`)
    parent_run_id: Optional[str] = None
    run_name: Optional[str] = None
    extra_tags: Optional[dict[str, str]] = None
    cause: str = ""
    end: Optional[dict[str, Any]] = None  # a parent run's end (`keep_end`): run_id, status, metrics
    partial_run_id: Optional[str] = None  # the run the store made before it refused the rest: deleted at import


def keep(
    result: RunResult,
    tracking_uri: str,
    experiment: str,
    cause: str,
    parent_run_id: Optional[str] = None,
    run_name: Optional[str] = None,
    extra_tags: Optional[dict[str, str]] = None,
    partial_run_id: Optional[str] = None,
) -> str:
    """Write `result` to the spool, or where `last_resort_dir` says when the spool cannot take it, or at last
    on stdout; returns how the command names where it is (`kept`, or a line that also says why the spool could
    not take it). Never raises for a spool that cannot be written: the result is the thing to keep."""
    doc = {
        "tracking_uri": absolute_uri(tracking_uri),  # the store meant, whichever directory imports it
        "experiment": experiment,
        "parent_run_id": parent_run_id,
        "run_name": run_name,
        "extra_tags": extra_tags,
        "cause": cause,
        "spooled_at": time.time(),
        "spool": str(spool_dir().absolute()),  # the spool it was meant for: in the last resort, whose it is
        "result": dataclasses.asdict(result),
        "partial_run_id": partial_run_id,
    }
    return _keep(doc)


def keep_end(
    tracking_uri: str, experiment: str, run_id: str, status: str, metrics: dict[str, float], cause: str
) -> str:
    """A parent run's end the store refused (`Recorder.end_parent`): kept as `keep` keeps a result; the import
    closes the run (`Recorder.close_spooled`). Returns where it is, as `keep` does."""
    end = {"run_id": run_id, "status": status, "metrics": metrics}
    doc = {"tracking_uri": absolute_uri(tracking_uri), "experiment": experiment, "cause": cause, "end": end}
    return _keep({**doc, "spooled_at": time.time(), "spool": str(spool_dir().absolute())}, "parent run's end")


def _keep(doc: dict[str, Any], what: str = "result") -> str:
    text = json.dumps(doc, default=str)
    name = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}.json"
    try:
        spool_dir().mkdir(parents=True, exist_ok=True)
        return kept(_write(spool_dir(), name, text), what)
    except OSError as e:
        spool_cause = f"spool {spool_dir()}: {e.strerror or e}"
    try:
        last_resort_dir().mkdir(mode=0o700, exist_ok=True)  # under a directory every user writes: this user's alone
        path = _write(last_resort_dir(), name, text)
        return f"{spool_cause}; {kept(path, what)}"
    except OSError as e:
        last_cause = f"{last_resort_dir()}: {e.strerror or e}"
    print(text, flush=True)  # the last place left: the terminal, or whatever stdout is written to
    return (
        f"{spool_cause}; {last_cause}; the {what} is printed on stdout above as one line of JSON "
        f"(saved to a file, {command('sweep.spool', 'import', 'FILE')} writes it in)"
    )


def _write(directory: Path, name: str, text: str) -> Path:
    """`text` as `directory/name`, whole or not at all: written aside, synced, then renamed into place (a full
    disk or a crash leaves no partial file, and no empty one)."""
    path = directory / name
    tmp = directory / f".{name}.tmp"
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the rename itself made durable; a directory that cannot be synced is rare
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return path


# a result file an import has claimed (renamed aside, atomic: a second import skips it): X.json.PID.START.claimed
_CLAIMED = re.compile(r"(?P<name>.+\.json)\.(?P<pid>\d+)(?:\.(?P<start>\d+))?\.claimed")


def _claimed(path: Path) -> Path:
    return path.with_name(f"{path.name}.{os.getpid()}.{proc_start(os.getpid()) or 0}.claimed")


def _reclaim(d: Path) -> None:
    """A claim whose import is gone is the spool's again (an import killed, SIGKILL or a power cut, between
    claiming a file and writing it left it claimed for good: no `list` or `import` read it, the result lost)."""
    for p in d.glob("*.json.*.claimed"):
        m = _CLAIMED.fullmatch(p.name)
        if m and not alive(int(m["pid"]), "" if m["start"] in (None, "0") else m["start"]):
            with contextlib.suppress(OSError):  # another import took it back first
                os.rename(p, p.with_name(m["name"]))


def _found(files: Sequence[Path] = ()) -> list[Path]:
    """`files`, else the spool's and the last resort's result files, oldest first."""
    dirs = [d for d in (spool_dir(), last_resort_dir()) if not files and d.is_dir()]
    for d in dirs:
        _reclaim(d)
    found = list(files) or [p for d in dirs for p in d.glob("*.json")]
    return sorted(found, key=lambda p: p.name)


def _read(p: Path) -> "dict[str, Any] | str":
    """A result file's contents, or why it is none (a file is written aside and renamed whole: one that cannot be
    read is damaged, or not the spool's)."""
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    if not isinstance(doc, dict) or not isinstance(doc.get("tracking_uri"), str) or "experiment" not in doc:
        return "no store or experiment named in it"
    res = doc.get("result")
    if res is not None:  # one that is no RunResult was a TypeError traceback of `list` and `import`, and every later
        try:  # run into its store failed to record ("RunResult.__init__() missing ...") and was spooled too
            kept = RunResult(**res)
        except TypeError as e:
            return f"its result is not a run's ({e})"
        wrong = [f.name for f in dataclasses.fields(RunResult) if f.type.startswith("dict")]
        wrong = [k for k in wrong if not isinstance(getattr(kept, k), dict)]
        if wrong:
            return f"its result is not a run's ({', '.join(wrong)}: expected a mapping)"
        if not all(isinstance(v, (int, float)) for v in kept.metrics.values()):
            return "its result is not a run's (metrics: expected numbers)"
    return doc


def damaged(files: Sequence[Path] = ()) -> list[tuple[Path, str]]:
    """The files among `files` (else the spool's) that hold no result this version can read, and why: named by
    `sweep-spool` (they were skipped without a word, a result in them lost silently)."""
    return [(p, why) for p in _found(files) if isinstance(why := _read(p), str)]


def entries(tracking_uri: Optional[str] = None, files: Sequence[Path] = ()) -> list[Entry]:
    """Spooled results (for `tracking_uri` only, if given), oldest first: those in the spool and those in the last
    resort that this spool could not take, or only those in `files` (a spool file, or one saved from what was
    printed), whichever store they were meant for (a store that cannot take them: they go to another)."""
    last = last_resort_dir()
    mine = str(spool_dir().absolute())
    out = []
    for p in _found(files):
        doc = _read(p)
        if isinstance(doc, str):
            continue  # not a result (`damaged` names it)
        if (
            not files
            and tracking_uri is not None
            and absolute_uri(doc.get("tracking_uri", "")) != absolute_uri(tracking_uri)
        ):
            continue
        if not files and p.parent == last and doc.get("spool", str(DEFAULT_SPOOL)) != mine:
            continue  # another spool's (another checkout's, a test's): its own import takes it
        res = doc.get("result")
        out.append(
            Entry(
                path=p,
                tracking_uri=doc["tracking_uri"],
                experiment=doc["experiment"],
                result=None if res is None else RunResult(**res),
                end=doc.get("end"),
                parent_run_id=doc.get("parent_run_id"),
                run_name=doc.get("run_name"),
                extra_tags=doc.get("extra_tags"),
                cause=doc.get("cause", ""),
                partial_run_id=doc.get("partial_run_id"),
            )
        )
    return out


def import_into(recorder: Any, files: Sequence[Path] = ()) -> int:
    """Write the spooled results meant for `recorder`'s store (those in `files`, if given) into it (each into its
    own experiment), remove their files; returns how many were written. A result that fails again stays."""
    todo = entries(recorder.tracking_uri, files)
    by_experiment: dict[str, Any] = {}
    n = 0
    for e in todo:
        claimed = _claimed(e.path)
        with signals_held():  # a stop signal waits for this result's claim, write and file's removal, then stops
            try:
                os.rename(e.path, claimed)  # atomic: a second process importing at once skips this one
            except FileNotFoundError:
                continue
            n += _import_one(recorder, by_experiment, e, claimed)
    return n


def _import_one(recorder: Any, by_experiment: dict[str, Any], e: Entry, claimed: Path) -> int:
    """Write one claimed result (1), or put its file back for a later import (0)."""
    try:
        rec = recorder if e.experiment == recorder.experiment else by_experiment.get(e.experiment)
        if rec is None:
            rec = by_experiment[e.experiment] = type(recorder)(recorder.tracking_uri, e.experiment, import_spool=False)
        if e.end is not None:
            rec.close_spooled(e.end, e.cause)
        else:
            rec.write(e.result, e.parent_run_id, e.run_name, e.extra_tags)
            if e.partial_run_id:  # its half-written twin (a server lost mid-run) was RUNNING for good
                rec.client.delete_run(e.partial_run_id)
    except Exception as err:  # noqa: BLE001 - this one stays for a later import; the rest and the caller go on
        os.rename(claimed, e.path)
        print(
            f"sweep: spooled result {e.path} not written ({err}); it stays in the spool",
            file=sys.stderr,
            flush=True,
        )
        return 0
    except BaseException:
        os.rename(claimed, e.path)
        raise
    claimed.unlink()
    return 1
