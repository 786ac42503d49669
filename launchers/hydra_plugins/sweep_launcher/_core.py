"""Runs one job in a worker: a local worker process, a Modal container, or Modal's Function.local().

The session (once per batch) crosses the process boundary as cloudpickle bytes: plain pickle fails on Hydra's
Singleton state (OmegaConf resolver closures), on the HydraContext and on task functions defined in a script.
A job config goes to a local worker as plain pickle, ~3x faster (a forked or spawned worker imports the same
modules, `__main__` included); to Modal, where nothing of this process exists, as cloudpickle.
The worker never touches MLflow: it returns a `Reply` and the launching process records it.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import pickle
import resource
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, run_job, setup_globals
from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from hydra_plugins.sweep_launcher._pickling import dumps

MAX_SHIPPED_FILE = 1 << 20  # job output files larger than this stay in the Modal container


@dataclass
class Session:
    """What every job of one launch() shares; sent to a local worker once, not per job."""

    hydra_context: HydraContext
    task_function: Callable[[DictConfig], Any]
    singleton_state: dict[Any, Any]
    fast: bool = False  # the lean run_job of _fast/run_job (tested Hydra versions only); else Hydra's own run_job
    batcher: Any = None  # the hooks whose run_batch solves a batch (hydra.launcher.batch > 1)
    time_limited: bool = False  # a time limit holds: the worker passes on what the app says it covers (timer.py)


@dataclass
class Reply:
    idx: int
    job_return: Optional[JobReturn]
    error: Optional[str] = None  # traceback text when the task raised or the worker failed
    reason: Optional[str] = None  # one line: why it failed (for the end-of-sweep summary)
    wall_s: float = 0.0  # the task function's wall-clock in the worker (Modal: what is billed)
    cpu_s: float = 0.0  # the task function's CPU seconds (all threads of the worker process)
    files: dict[str, str] = field(default_factory=dict)  # output-dir files, for jobs run in a container
    output_dir: Optional[str] = None  # the job's hydra.runtime.output_dir
    time_limit_s: Optional[float] = None  # the limit the job ran past (the launcher killed its worker)
    stop: Optional[str] = None  # why no later job can run either (ENOSPC in its directory): the sweep stops


_restored: Optional[int] = None  # id of the Session whose Hydra globals this process holds
_loaded: Optional[tuple[bytes, Session]] = None  # (digest of its bytes, the session) last loaded here


def load_session(data: bytes) -> Session:
    """A batch's session from the bytes the launcher made once: loaded once per process (a worker, or a Modal
    container that serves many jobs of the batch), the same object for every job."""
    global _loaded
    key = hashlib.blake2b(data, digest_size=16).digest()
    if _loaded is None or _loaded[0] != key:
        _loaded = (key, pickle.loads(data))
    return _loaded[1]


def _restore(session: Session) -> None:
    global _restored
    if _restored != id(session):
        if session.fast:
            from hydra_plugins.sweep_launcher._fast.parse_cache import install  # noqa: PLC0415 - the fast path: imported only behind its version gate

            install()
        setup_globals()
        Singleton.set_state(session.singleton_state)
        _restored = id(session)


def dump_config(cfg: DictConfig) -> bytes:
    """A job config as it travels to a worker: plain pickle (configs hold no code; ~3x faster than
    cloudpickle), cloudpickle for one that holds something plain pickle refuses."""
    try:
        return pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - e.g. a class defined in a script
        return dumps(cfg)


@dataclass
class Spec:
    """A job as it travels to a local worker that holds its template (`_fast/template`): what it adds to it."""

    template: int  # the FastComposer template's id
    overrides: list[tuple[str, str]]  # each of the job's overrides: (key or group, as written)
    values: list[tuple[str, Any, str]]  # the plain values among them: (key, value, as written)
    num: int  # hydra.job.num (the job's index)
    cache: dict[str, Any]  # the sweep's resolver cache (`now`: one sweep dir for every job), as Hydra copies it


class Pickled:
    """A job config pickled whole (`dump_config`): for Modal, for Hydra's own composition, for a job without a
    template. What `run_one` reads a job's config from, as `_fast/template.Made` is."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def config(self) -> DictConfig:
        return pickle.loads(self.data)

    def task(self) -> DictConfig:
        """The task's own copy, without the hydra section: a second `pickle.loads` (~6x faster than a deep copy
        such as OmegaConf.masked_copy's)."""
        cfg = pickle.loads(self.data)
        with read_write(cfg), open_dict(cfg):
            del cfg["hydra"]
        return cfg

    def overrides(self) -> list[str]:
        return list(self.config().hydra.overrides.task)


def run_one(
    session: Session,
    idx: int,
    source: Any,
    collect_files: bool = False,
    hydra_template: Any = None,
    solved: Optional[tuple[Any, float, float]] = None,
    task_cfg: Optional[DictConfig] = None,
) -> Reply:
    """Run the job config `source.config()` (`Pickled`, `_fast/template.Made`) as Hydra's run_job would in-process;
    never raises.

    The reply's JobReturn travels without its cfg and hydra_cfg: the launcher composed them and rebuilds
    them from its own copy if anything asks (`_jobs.ReturnedJob`); `output_dir` is what the worker added.
    `hydra_template`: a `_fast/run_job.HydraYaml` (fast path only). `solved`: (value or exception, wall, CPU
    seconds) of a job its batch solved (`run_batch`): the task returns (or raises) it instead of running, and
    `task_cfg` is the config the batch solved it from (fast path: the task's config, not loaded again)."""
    _restore(session)
    clock: dict[str, float] = {}
    raised: list[BaseException] = []  # what the task raised (run_job keeps it where only a private name reads it)

    def timed(task_cfg: DictConfig) -> Any:
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            if solved is not None:
                if isinstance(solved[0], BaseException):
                    raise solved[0]
                return solved[0]
            return session.task_function(task_cfg)
        except BaseException as e:
            raised.append(e)
            raise
        finally:
            clock["wall"], clock["cpu"] = time.perf_counter() - w0, time.process_time() - c0
            if solved is not None:
                clock["wall"], clock["cpu"] = solved[1], solved[2]

    error = reason = output_dir = stop = None
    try:
        if session.fast:
            from hydra_plugins.sweep_launcher._fast.run_job import run_job as lean_run_job  # noqa: PLC0415 - the fast path: imported only behind its version gate

            ret = lean_run_job(
                hydra_context=session.hydra_context,
                task_function=timed,
                source=source,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
                hydra_template=hydra_template,
                task_cfg=task_cfg,
            )
        else:
            ret = run_job(
                hydra_context=session.hydra_context,
                task_function=timed,
                config=source.config(),
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
            )
        if ret.status == JobStatus.FAILED:  # run_job marks FAILED only what the task raised
            exc = raised[-1]
            error = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            reason = _reason(exc)
        output_dir = str(ret.hydra_cfg.hydra.runtime.output_dir)
    except BaseException as e:  # noqa: BLE001 - SystemExit from a task, a broken job dir, ...: one FAILED job
        reason = _reason(e)
        stop = _disk_full(e)
        overrides = source.overrides()
        ret = JobReturn(overrides=overrides, status=JobStatus.FAILED, _return_value=RuntimeError(reason))
        error = traceback.format_exc()
    ret.cfg = ret.hydra_cfg = None
    reply = Reply(
        idx=idx,
        job_return=ret,
        error=error,
        reason=reason,
        wall_s=clock.get("wall", 0.0),
        cpu_s=clock.get("cpu", 0.0),
        output_dir=output_dir,
        stop=stop,
    )
    if collect_files and output_dir is not None:
        reply.files = _output_files(Path(output_dir))
    return reply


def run_batch(session: Session, items: list[tuple[int, Any, Any]], collect_files: bool = False) -> Iterator[Reply]:
    """A batch's jobs (idx, config source, hydra template) solved together by the hooks' `run_batch`, then each
    run through `run_one` with its own value: one reply per job, in order. Each job's wall-clock and CPU seconds
    are the batch's shares; a batch whose `run_batch` raises is that exception for every job."""
    _restore(session)
    w0, c0 = time.perf_counter(), time.process_time()
    task_cfgs: list[Any] = [None] * len(items)  # None: run_job loads its own (a batch that failed as a whole)
    try:
        task_cfgs = [source.task() if session.fast else task_config(source.config()) for _, source, _ in items]
        values: list[Any] = list(session.batcher.run_batch(task_cfgs))
        if len(values) != len(items):
            raise RuntimeError(f"run_batch returned {len(values)} values for {len(items)} jobs")
    except Exception as e:  # noqa: BLE001 - the batch as a whole failed: each job reports it
        values = [e] * len(items)
    wall, cpu = (time.perf_counter() - w0) / len(items), (time.process_time() - c0) / len(items)
    for (idx, source, tpl), value, cfg in zip(items, values, task_cfgs):
        yield run_one(session, idx, source, collect_files, hydra_template=tpl, solved=(value, wall, cpu), task_cfg=cfg)


def task_config(cfg: DictConfig) -> DictConfig:
    """What the task function gets: the job config without its hydra section."""
    return OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])


def _disk_full(e: BaseException) -> Optional[str]:
    """Why no later job can run, where the job failed outside its task (its directory, its config's files) for a
    full disk: the next jobs' directories are on it too (each of a sweep's remaining jobs failed alike)."""
    seen: BaseException | None = e
    for _ in range(16):  # (a chain that loops back on itself ends too)
        if seen is None:
            return None
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"{seen.strerror}: {seen.filename}" if seen.filename else str(seen.strerror)
        seen = seen.__cause__ or seen.__context__
    return None


def _reason(e: BaseException) -> str:
    # sys.exit() while handling an error (the project's task on a ConfigError): the error is the reason
    if isinstance(e, SystemExit) and e.__context__ is not None:
        e = e.__context__
    return f"{type(e).__name__}: {e}{_memory_refused(e)}"


# what Python and the loader say when an address-space limit refuses memory mid-import (under `ulimit -v 800000`
# importing torch: "SystemError: <function _find_and_load ...> returned NULL without setting an exception")
REFUSED = ("without setting an exception", "error return without exception set", "failed to map segment")


def _memory_refused(e: BaseException) -> str:
    """Where this shell's address-space limit refused the job's memory: the limit named, and what to do."""
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft == resource.RLIM_INFINITY:
        return ""
    if not isinstance(e, MemoryError) and not any(w in str(e) for w in REFUSED):
        return ""
    return f" (this shell's `ulimit -v` is {soft // 1024:,} KB: the job's memory was refused; raise it)"


def _output_files(root: Path) -> dict[str, str]:
    """Small text files of a job's output dir (log, .hydra/*.yaml): a container's disk is gone afterwards."""
    out: dict[str, str] = {}
    for p in root.rglob("*"):
        if p.is_file() and p.stat().st_size <= MAX_SHIPPED_FILE:
            try:
                out[str(p.relative_to(root))] = p.read_text()
            except (UnicodeDecodeError, OSError):
                continue
    return out


def dump_reply(reply: Reply) -> bytes:
    """Pickle the reply with cloudpickle (a return value's class may live in a script: by value); one that cannot
    travel makes the job FAILED. It is small: the JobReturn travels without its configs."""
    try:
        return dumps(reply)
    except Exception as e:  # noqa: BLE001
        why = f"the job's return value could not be sent back ({type(e).__name__}: {e})"
        if reply.job_return is not None:
            reply.job_return.status = JobStatus.FAILED
            reply.job_return.return_value = RuntimeError(why)
        reply.error = (reply.error or "") + why + "\n"
        return dumps(reply)


def load_reply(data: bytes, idx: int) -> Reply:
    """A reply as the launcher receives it; one that cannot be loaded here (its value's class missing in this
    process, a value whose unpickling raises) is job `idx`'s FAILED reply, with why in one line."""
    try:
        return pickle.loads(data)
    except KeyboardInterrupt:  # a signal (the launcher's Interrupted) is no job's fault
        raise
    except BaseException as e:  # noqa: BLE001
        why = f"the job's result could not be loaded by the launcher ({type(e).__name__}: {e})"
        return Reply(idx=idx, job_return=None, error=traceback.format_exc() + why + "\n", reason=why)


def make_payload(session_bytes: bytes, cfg_bytes: bytes, collect_files: bool = False) -> bytes:
    """What `execute` takes: the batch's session as the bytes made once per batch (not pickled again per job)."""
    return pickle.dumps(
        {"session": session_bytes, "cfg_bytes": cfg_bytes, "collect_files": collect_files},
        protocol=pickle.HIGHEST_PROTOCOL,
    )


def make_batch_payload(session_bytes: bytes, items: list[tuple[int, bytes]], collect_files: bool = False) -> bytes:
    """What `execute` takes for a batch: its jobs' (idx, config bytes), run together in one container."""
    return pickle.dumps(
        {"session": session_bytes, "batch": items, "collect_files": collect_files}, protocol=pickle.HIGHEST_PROTOCOL
    )


def split_replies(data: bytes, idxs: list[int]) -> list[bytes]:
    """A batch's answer from `execute` -> each job's reply bytes, in order. An answer for the batch as a whole (its
    payload could not be unpacked, Modal lost its container) is every job's, each under its own index."""
    try:
        out = pickle.loads(data)
    except Exception:  # noqa: BLE001 - a reply this process cannot load: each job's load_reply says why
        return [data] * len(idxs)
    if isinstance(out, tuple) and len(out) == 2 and out[0] == "batch":
        return list(out[1])
    if isinstance(out, Reply):
        return [dumps(dataclasses.replace(out, idx=i)) for i in idxs]
    return [data] * len(idxs)


def execute(idx: int, payload: bytes) -> tuple[int, bytes]:
    """Self-contained entry point (Modal: remote and Function.local()): job `idx`'s `make_payload()` ->
    (idx, cloudpickled Reply); the index travels beside the reply, so an unordered fan-out knows each reply's
    job without loading it. Never raises: a payload that cannot be unpacked where it runs (a module missing in
    the container) is the job's FAILED reply, so Modal's fan-out only ever returns an exception of its own."""
    try:
        job = pickle.loads(payload)
        session = load_session(job["session"])
        if "batch" in job:  # (first job's idx, ("batch", [each job's reply bytes])): split_replies
            items = [(i, Pickled(cfg_bytes), None) for i, cfg_bytes in job["batch"]]
            replies = [dump_reply(r) for r in run_batch(session, items, job.get("collect_files", False))]
            return idx, pickle.dumps(("batch", replies), protocol=pickle.HIGHEST_PROTOCOL)
        return idx, dump_reply(run_one(session, idx, Pickled(job["cfg_bytes"]), job.get("collect_files", False)))
    except BaseException as e:  # noqa: BLE001
        return idx, dump_reply(Reply(idx=idx, job_return=None, error=traceback.format_exc(), reason=_reason(e)))
