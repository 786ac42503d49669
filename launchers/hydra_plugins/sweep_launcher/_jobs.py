"""A job as the launcher holds it, and the JobReturns it hands back to the sweeper.

A job is held small (its index, overrides, name, placement, the app's notes); its composed config exists only
while it is checked and while it runs (`compose`), so a grid of any size costs little memory. A JobReturn
rebuilds its configs on first access by composing the job again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from hydra_plugins.sweep_launcher._core import Reply, task_config
from hydra_plugins.sweep_launcher.hooks import JobPlan, PlannedJob


@dataclass
class Job(PlannedJob):
    template: Optional[int] = None  # the FastComposer template the job was made from (None: Hydra's path)
    started: Optional[float] = None
    batch: Optional[int] = None  # the id of the batch it is solved in (_batches.py); None: alone
    plan: JobPlan = field(default_factory=JobPlan)  # the app's plan of it, over the launcher's settings (_launch.py)
    time_limit_s: Optional[float] = None  # the most seconds it may run on a local worker (_time_limit.py)
    left_out: bool = False  # placed on a backend not ready here (Modal without a token), others running (_launch.py)
    # while set, what composes `cfg` when it is first read: a job's outcome goes to the hooks with its config
    # composed only if they read it (the dispatcher's `_for_hooks`)
    again: Optional[Callable[[], DictConfig]] = field(default=None, repr=False, compare=False)

    @property  # type: ignore[override]
    def cfg(self) -> Optional[DictConfig]:
        if self.__dict__.get("_cfg") is None and self.again is not None:
            self.__dict__["_cfg"] = self.again()
        return self.__dict__.get("_cfg")

    @cfg.setter
    def cfg(self, value: Optional[DictConfig]) -> None:
        self.__dict__["_cfg"] = value


def compose(
    launcher: Any, overrides: Sequence[str], idx: int, in_turn: bool = False
) -> tuple[DictConfig, Optional[int]]:
    """Job `idx`'s config as Hydra's launchers compose it (`load_sweep_config`, then hydra.job.id and num), and
    the id of the FastComposer template it was made from (None: Hydra's own composition). `in_turn`: valid only
    until the next job is composed so (`FastComposer.take_in_turn`)."""
    loader = launcher.hydra_context.config_loader
    if hasattr(loader, "take"):  # FastComposer
        take = loader.take_in_turn if in_turn else loader.take
        cfg, template = take(launcher.config, list(overrides))
    else:
        cfg, template = loader.load_sweep_config(launcher.config, list(overrides)), None
    with open_dict(cfg):
        cfg.hydra.job.id = job_id(str(cfg.hydra.job.name), idx)
        cfg.hydra.job.num = idx
    return cfg, template


def job_id(name: str, idx: int) -> str:
    """hydra.job.id of job `idx` of the task `name`, as Hydra's launchers set it."""
    return f"{name}_{idx}"


def composer(launcher: Any, job: Job) -> Callable[[], DictConfig]:
    """What composes `job` again, later: small to keep (the launcher and the job's overrides)."""
    return partial(_composed, launcher, list(job.overrides), job.idx)


def _composed(launcher: Any, overrides: list[str], idx: int) -> DictConfig:
    return compose(launcher, overrides, idx)[0]


def _configs_property(name: str) -> property:
    def get(self: "ReturnedJob") -> Any:
        if self._source is not None:
            self._build()
        return self.__dict__.get(name)

    def set_(self: "ReturnedJob", value: Any) -> None:
        self.__dict__[name] = value

    return property(get, set_)


class ReturnedJob(JobReturn):
    """A worker's JobReturn, or a skipped job's. Its cfg and hydra_cfg do not travel back (pickling them both
    ways cost more than the rest of a job's overhead) and are not kept (the sweeper keeps every return): they
    are composed again on first access, with the output dir the worker set."""

    _source: Optional[tuple[Callable[[], DictConfig], Optional[str]]] = None
    cfg = _configs_property("cfg")  # type: ignore[assignment]
    hydra_cfg = _configs_property("hydra_cfg")  # type: ignore[assignment]

    @classmethod
    def of(cls, ret: JobReturn, full_cfg: Callable[[], DictConfig], output_dir: Optional[str]) -> "ReturnedJob":
        out = cls(
            **{k: ret.__dict__.get(k) for k in ("overrides", "working_dir", "task_name", "status", "_return_value")}
        )
        out._source = (full_cfg, output_dir)
        return out

    def _build(self) -> None:
        make, output_dir = self._source  # type: ignore[misc]
        self._source = None
        full = make()
        self.__dict__["cfg"] = task_config(full)
        hydra_cfg = OmegaConf.masked_copy(full, "hydra")
        if output_dir is not None:
            with read_write(hydra_cfg.hydra.runtime), open_dict(hydra_cfg.hydra.runtime):
                hydra_cfg.hydra.runtime.output_dir = output_dir
        OmegaConf.set_readonly(hydra_cfg.hydra, True)
        self.__dict__["hydra_cfg"] = hydra_cfg


class IsolatedFailure(ReturnedJob):
    """A FAILED JobReturn whose `return_value` gives the exception instead of raising it, so the sweeper
    goes on with its next batch; the hooks' sweep_ended decides the exit code once the whole sweep ran."""

    @property  # type: ignore[override]
    def return_value(self) -> Any:
        return self._return_value

    @return_value.setter
    def return_value(self, value: Any) -> None:
        self._return_value = value

    @classmethod
    def from_return(cls, ret: JobReturn) -> "IsolatedFailure":
        failure = cls.__new__(cls)  # the same fields (lazy configs included)
        failure.__dict__.update(ret.__dict__)
        return failure


class RemoteTraceback(Exception):
    """The task's traceback where it ran, as text: the cause of the exception the sweeper raises, so the user sees
    the task's own frames under the sweeper's (an exception crosses a pipe without its traceback). As
    concurrent.futures does for a process pool."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text.rstrip()}\n"""'


def job_return(job: Job, reply: Reply, again: Callable[[], DictConfig]) -> JobReturn:
    """`again`: what composes the job's config again (`composer`), when the sweeper reads it."""
    if reply.job_return is not None:
        ret: JobReturn = ReturnedJob.of(reply.job_return, again, reply.output_dir)
    else:  # the job never ran (worker died, Modal refused it): a FAILED return Hydra can read
        assert job.cfg is not None
        ret = JobReturn(
            overrides=job.overrides,
            cfg=task_config(job.cfg),
            hydra_cfg=None,
            working_dir=None,
            task_name=str(job.cfg.hydra.job.name),
            status=JobStatus.FAILED,
            _return_value=RuntimeError((reply.error or "failed").strip().splitlines()[-1]),
        )
    exc = ret.__dict__.get("_return_value")  # a FAILED return's exception (JobReturn has no public getter)
    if (
        ret.status == JobStatus.FAILED
        and isinstance(exc, BaseException)
        and reply.error
        and len(reply.error.strip().splitlines()) > 1
    ):  # more than the exception's own line
        exc.__cause__ = RemoteTraceback(reply.error)
    return ret


def skipped_return(job: Job, again: Callable[[], DictConfig], task_name: str) -> JobReturn:
    """A job the hooks skipped (already done): COMPLETED with no value."""
    ret = JobReturn(overrides=job.overrides, task_name=task_name, status=JobStatus.COMPLETED, _return_value=None)
    return ReturnedJob.of(ret, again, None)


def write_files(job: Job, files: dict[str, str]) -> None:
    """Output files of a job that ran in a Modal container, under its usual local job dir."""
    assert job.cfg is not None
    HydraConfig.instance().set_config(job.cfg)
    out = Path(str(job.cfg.hydra.sweep.dir)) / str(job.cfg.hydra.sweep.subdir)
    for rel, text in files.items():
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
