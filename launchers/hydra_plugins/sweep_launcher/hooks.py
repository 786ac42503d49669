"""The one seam between this launcher and the app it runs: `LaunchHooks`, a Hydra callback that the launcher
also drives from the launching process. The launcher imports nothing of the app; the app names its hooks the
usual Hydra way, in `hydra.callbacks` (`_target_: myapp.MyHooks`, a subclass of `LaunchHooks`).

Under any launcher the hooks are an ordinary Hydra callback (`on_multirun_start`, `on_job_end`,
`on_multirun_end`, ...). Under this launcher they offer themselves at `on_multirun_start`, and the launcher
then asks, in the launching process, one question per job and says what became of it:

    plan(jobs)                  before any job of a batch starts, every job of it: each job's `JobPlan` (where it
                                runs, whether it is done or skipped and why, its batch key and size, its time
                                limit, the seconds it is expected to take), yielded as (index, plan) before the
                                next job is drawn (the launcher looks for a backend's credentials as the jobs
                                come, before the app records anything); a job yielded again later is planned
                                again (an app that reads its store once, after the pass, yields the jobs it finds
                                done then, and what their earlier runs took); a job not yielded runs here, alone,
                                without a time limit. Refuse a bad job: raise `Refused` (the launcher prints its
                                message and exits 2).
                                `jobs` is a stream: each job's `cfg` is composed while it is the current one
                                and dropped when the next is drawn (a grid's configs never all exist at once;
                                read it, do not change it: the next job of its shape is made on it), with
                                `resolved` where the launcher has it (plain data, read faster);
                                keep what is small in `job.data` (e.g. what `job_ended` records)
    job_ended(job, outcome)     each job's outcome as it arrives (FINISHED, FAILED or KILLED), in one process;
                                `job.cfg` is composed again for it when read (keep what a finished job's
                                record needs in `job.data` at plan, and it costs no composition); returns a
                                finished job's line on stdout (None: `[FINISHED] <job name>`)
    sweep_ended(status, tally)  at the end (from on_multirun_end), or at once when the sweep is interrupted
    title(cfg)                  the multirun's name on the progress line

and, in the worker, `run_batch(cfgs)` solves a batch's task configs together: one value (what the task function
would return) or exception per job, in order; each job then runs through Hydra's run_job with its own value (its
own job dir, callbacks, JobReturn), and its wall-clock and CPU seconds are the batch's divided by its jobs.

They stand aside on the job side: `self.driven` is true in the workers (Hydra's run_job calls
`on_job_end` there), so the app records each job once, from one process, whatever ran it.

With hooks, a failed job does not stop the sweep: the launcher returns it as a FAILED JobReturn that does not
raise, and `sweep_ended` (default: the summary, the failures, exit 1) decides the exit code once every batch
ran. Without hooks the launcher keeps Hydra's own semantics (the sweeper raises the first failure of a batch).
"""

# No `from __future__ import annotations`: Hydra's plugin scan execs this module outside sys.modules, where
# dataclasses cannot resolve string annotations.
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Iterator, Optional, Sequence

from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from hydra_plugins.sweep_launcher._signals import exit_if_signalled
from hydra_plugins.sweep_launcher.commands import this_command

_offered: list["LaunchHooks"] = []  # hooks of the multirun in progress in this process


class Refused(Exception):
    """Raised by `plan`: a job's config is not allowed (exit 2), or what the jobs need is not there (`code`: e.g.
    1 for a store that cannot be opened). The launcher prints the message and exits `code` before any job starts."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class JobPlan:
    """The app's one answer about a job (`LaunchHooks.plan`), before any job starts."""

    where: str = "local"  # local | modal | a backend's name (backends.py); hydra.launcher.route=<place> overrides it
    gpu: Optional[str] = None  # the GPU it asks of its backend
    done: bool = False  # already done: skipped (resume), unless hydra.launcher.force=true
    skip: Optional[str] = None  # why it does not run all the same (another sweep runs it), said once per reason
    batch_key: Optional[Hashable] = None  # jobs of equal keys may be solved together by `run_batch`; None: alone
    batch: int = 1  # the most jobs of its key solved together, where hydra.launcher.batch is null (`batch_size`)
    # the most seconds it may run on a local worker, where hydra.launcher.time_limit_s is null (`time_limit`)
    time_limit_s: Optional[float] = None
    # placed on a backend that cannot take it now (Modal without its token): what runs it here instead, said first
    # in the refusal (called only then); None: the backend's own advice
    instead: Optional[Callable[[], Optional[str]]] = None
    # the seconds it is expected to take (an earlier run of it), for the start's estimate line and the ETA; None:
    # the ETA goes by the finished jobs
    expected_s: Optional[float] = None


@dataclass
class PlannedJob:
    """A job as the hooks see it."""

    idx: int
    overrides: list[str]
    # composed, hydra section included, while the hooks look at this job (plan's stream, job_ended); else None
    cfg: Optional[DictConfig] = None
    where: str = "local"  # where it runs (`place`): local | modal | a backend's name (backends.py)
    gpu: Optional[str] = None
    route: Optional[str] = None  # where hydra.launcher.route sends every job; None: where the app's plan says
    data: dict[str, Any] = field(default_factory=dict)  # the app's own per-job notes (plan -> job_ended)
    name: str = ""  # what the job varies within the sweep (naming.py): console lines, run name, failures
    # in plan's stream, where the launcher made it without resolving `cfg`: the job's top-level keys but hydra,
    # resolved, as plain data (a key whose interpolations read the job's own values is left out); else None
    resolved: Optional[dict[str, Any]] = None

    def label(self) -> str:
        return self.name or f"#{self.idx} " + (" ".join(self.overrides) or "(no overrides)")

    def place(self, where: str, gpu: Optional[str]) -> tuple[str, Optional[str]]:
        """Where the job runs when the app places it at (where, gpu): the route's place, where hydra.launcher.route
        names one; a job on a local worker has no GPU."""
        where = self.route or where
        return where, (gpu if where != "local" else None)


@dataclass
class Outcome:
    status: str  # FINISHED | FAILED | KILLED
    job_return: Optional[JobReturn]  # None: the job never ran to an end (worker died, Modal refused, killed)
    error: Optional[str] = None  # traceback text
    reason: Optional[str] = None  # one line
    wall_s: float = 0.0  # the task's wall-clock where it ran (Modal: what is billed)
    cpu_s: float = 0.0  # the task's CPU seconds
    offline: bool = False  # a backend's job run on the local workers (Modal offline: its Function's .local())
    time_limit_s: Optional[float] = None  # FAILED for running past this limit (its worker killed); None: it did not

    @property
    def value(self) -> Any:
        return self.job_return.return_value if self.job_return is not None else None  # FAILED: the exception


@dataclass
class Tally:
    """What the launcher saw over the whole multirun."""

    t0: float = field(default_factory=time.perf_counter)  # when the multirun's first batch began
    done: int = 0
    skipped: int = 0
    skipped_for: dict[str, int] = field(default_factory=dict)  # jobs skipped for another reason than done: by why
    killed: int = 0
    left_out: int = 0  # jobs placed on a backend not ready here (Modal without a token), in a sweep whose others ran
    left_out_note: str = ""  # which they were and how to run them
    failures: list[tuple[str, str]] = field(default_factory=list)  # (job label, one-line reason)
    launcher: dict[str, Any] = field(default_factory=dict)  # name, route, n_workers, force, modal.offline
    force_key: str = "hydra.launcher.force"  # the setting that re-runs jobs skipped as already done
    closers: list[Any] = field(default_factory=list)  # the launcher's own end-of-sweep steps (its pool)

    def close(self) -> None:
        while self.closers:
            self.closers.pop()()


class LaunchHooks(Callback):
    driven: bool = False  # set by the launcher: true in the workers and in the launching process
    tally: Optional[Tally] = None
    # modules each local worker imports when it starts, while the launcher composes: a worker's first job
    # then pays no import time (added to hydra.launcher.preload; missing ones are skipped)
    preload: Sequence[str] = ()

    # -- what the launcher calls (launching process) ----------------------------------------------------------
    def title(self, cfg: DictConfig) -> Optional[str]:
        """The multirun's name on the progress line (`<title> 3/30 · 3 done · ...`); None: Hydra's job name."""
        return None

    def plan(self, jobs: Iterator[PlannedJob]) -> Iterable[tuple[int, JobPlan]]:
        """Each job's (index, JobPlan), as the module's docstring says; none (default): every job runs here."""
        return ()

    def run_batch(self, cfgs: Sequence[DictConfig]) -> list[Any]:
        """In the worker: the task configs (no hydra section) of jobs the plan keyed alike, solved together;
        one return value or raised exception per job, in order. A job that fails alone is its exception here,
        and the rest of its batch goes on."""
        raise NotImplementedError(f"{type(self).__name__} keys jobs into batches but has no run_batch")

    def job_ended(self, job: PlannedJob, outcome: Outcome) -> Optional[str]:
        """The job's outcome; returns a finished job's line on stdout (None: `[FINISHED] <job name>`)."""
        return None

    def sweep_ended(self, status: str, tally: Tally, note: str = "") -> None:
        """Default: one summary line, the failures on stderr, exit 1 when there were any (not when the sweep
        was interrupted: the launcher exits 128+signal)."""
        n_failed = len(tally.failures)
        msg = (
            f"sweep: {tally.done} job(s) finished, {n_failed} failed, {tally.skipped} skipped"
            + (f" (already done; {rerun_hint(tally.force_key)})" if tally.skipped else "")
            + (f", {tally.killed} killed" if tally.killed else "")
            + "".join(f", {n} not run: {why}" for why, n in tally.skipped_for.items())
            + (f", {tally.left_out} left out ({tally.left_out_note})" if tally.left_out else "")
            + note
        )
        print(msg, file=sys.stderr if n_failed or status == "KILLED" else sys.stdout, flush=True)
        if tally.failures:
            print("sweep: failed jobs:", file=sys.stderr)
            for label, why in tally.failures:
                print(f"  {label}: {why}", file=sys.stderr)
            sys.stderr.flush()
            if status != "KILLED":
                raise SystemExit(1)

    # -- Hydra's callback events ----------------------------------------------------------------------------
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.driven, self.tally = False, None
        _offered.append(self)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self in _offered:
            _offered.remove(self)
        tally, self.tally = self.tally, None
        if tally is not None:  # driven by the launcher: the sweep ends here (Hydra calls this after the sweeper)
            try:
                tally.close()
                self.sweep_ended("FAILED" if tally.failures else "FINISHED", tally)
            finally:  # a signal since the last job waited for this: now it stops the command
                exit_if_signalled("after the last job: the sweep is recorded as it ended")

    def __getstate__(self) -> dict[str, Any]:
        # Hooks travel to the workers inside Hydra's context. Driven: only the flag (the app's state, an open
        # store, stays in the launching process); under another launcher, as they are.
        if self.driven:
            return {"driven": True}
        return {k: v for k, v in self.__dict__.items() if k != "tally"}


def batch_size(requested: Any, key: str) -> int:
    """A batch size (hydra.launcher.batch, or the app's own setting `key`): an integer >= 1; else Refused (exit 2)."""
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        meaning = "an integer >= 1 (the most jobs solved together in one task; 1: each job alone)"
        raise Refused(f"sweep: {key}={requested!r} is not allowed: expected {meaning}")
    return requested


def time_limit(requested: Any, key: str) -> Optional[float]:
    """A time limit (hydra.launcher.time_limit_s, or the app's own setting `key`): seconds > 0, or None (no limit);
    else Refused (exit 2)."""
    if requested is None:
        return None
    if isinstance(requested, bool) or not isinstance(requested, (int, float)) or not 0 < requested < float("inf"):
        raise Refused(
            f"sweep: {key}={requested!r} is not allowed: expected a number of seconds > 0 (the most a job may run), "
            "or null (no limit)"
        )
    return float(requested)


def rerun_hint(force_key: str, what: str = "them") -> str:
    """How to run again the jobs a resumed sweep skips: '<force_key>=true re-runs them: <this command with it>'
    (in the launching process: its command line is the user's)."""

    return f"{force_key}=true re-runs {what}: {this_command(f'{force_key}=true')}"


def take() -> list[LaunchHooks]:
    """The hooks offered by this process's multirun (the launcher calls this once, at its first launch)."""
    out = list(_offered)
    _offered.clear()
    return out
