"""Live progress, numbers before labels: `tiled_w1 3/30 · 3 done · 0 failed · 2 running · ETA 53s`.

A rich bar on a terminal; elsewhere (CI, pipes, log files) that line on stderr every few seconds and once at
the end, and each job's summary line on stdout. `hydra.launcher.progress=false` prints no progress at all.

The ETA is the jobs left, each at its expected seconds, over the worker slots: not the elapsed time per finished
job, which counts the workers' start-up and a burst of small jobs first (a preset's ETA went 10 -> 25 minutes
for a sweep that took 4). A job's seconds: what the hooks expect of it (`JobPlan.expected_s`, e.g. the same
job's earlier run), scaled by how the finished jobs compare with what was expected of them (trusted as far as
the expected work is done); a job nothing is
expected of: the mean of the finished jobs' seconds. With expectations the sweep starts with an estimate line;
without any, a line saying there is none until the first job ends."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Optional

from hydra_plugins.sweep_launcher._signals import output_closed

# a launcher attribute (api.JOBS_IN_SWEEP): the jobs a sweeper that launches a batch at a time will launch in all
JOBS_IN_SWEEP = "jobs_in_sweep"


def duration(seconds: float) -> str:
    """53s, 4m05s, 2h07m: short enough for a progress line; a time under half a second is <1s (a batched
    sweep's "estimate 0s" read as no estimate), none at all 0s."""
    if 0 < seconds < 0.5:
        return "<1s"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    PLAIN_EVERY_S = 5.0

    def __init__(
        self,
        total: int,
        enabled: bool = True,
        title: str = "sweep",
        clock: Callable[[], float] = time.monotonic,
        slots: int = 1,
        expected: Optional[dict[int, float]] = None,
        earlier: Optional["Progress"] = None,
        in_sweep: Optional[int] = None,
    ) -> None:
        """`earlier`: the sweep's previous launch's progress (a search launches its trials a batch at a time); this
        one counts on from it. `in_sweep`: the jobs the whole sweep will launch, where its sweeper says so."""
        # the sweep's first launch: a search's later ones (Optuna's, n_jobs trials each) each said "estimate <1s
        # for 2 job(s)", seven times in tune_sgd, none of them the search's
        self.first = earlier is None
        # counted from the sweep's start, not the batch's: tune_sgd said "2/2 · 2 done" after each of its batches
        before = earlier.done + earlier.failed if earlier else 0
        # (a search's jobs skipped as done lower `in_sweep`: a total that only grew never reached its end)
        self.total = max(before + total, in_sweep if in_sweep is not None else earlier.total if earlier else 0)
        self.slots = max(1, slots)  # jobs that run at once (local workers, remote jobs)
        self.launched = total  # this launch's jobs (a search launches its trials a batch at a time)
        self.expected = dict(expected or {})  # job index -> seconds expected of it (`JobPlan.expected_s`)
        self.took: list[float] = list(earlier.took) if earlier else []  # the finished jobs' seconds
        self.took_vs_expected = [0.0, 0.0]  # over the finished jobs with an expectation: seconds taken, expected
        self.title = title
        self.done, self.failed = (earlier.done, earlier.failed) if earlier else (0, 0)
        self.running: set[int] = set()  # remote jobs in flight
        self.n_local = 0
        self.clock = clock
        self.t0 = clock()
        self._last = 0.0
        self._last_plain = self.t0
        self._printed = ""
        self.enabled = enabled
        self._bar: Optional[Any] = None
        if enabled and sys.stderr.isatty():
            from rich.console import Console  # noqa: PLC0415 - rich: only when stderr is a terminal
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn  # noqa: PLC0415 - rich: only when stderr is a terminal
            from rich.progress import Progress as RichProgress  # noqa: PLC0415 - rich: only when stderr is a terminal

            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(
                    "· {task.fields[done]} done · {task.fields[failed]} failed · "
                    "{task.fields[running]} running · ETA {task.fields[eta]}"
                ),
                console=Console(stderr=True),
                redirect_stdout=True,
                redirect_stderr=True,
            )
            self._task = self._bar.add_task(
                title, total=self.total, completed=self.done + self.failed, done=self.done, failed=self.failed,
                running=0, eta="?",
            )  # fmt: skip

    def __enter__(self) -> "Progress":
        if self.enabled and self.first and self.launched:
            _say(self.estimate())
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self.refresh(force=True)
            self._bar.stop()
        elif self.enabled and self.done + self.failed and self.line() != self._printed:
            self._print()  # the log ends with where the sweep got to

    def recount(self, in_sweep: Optional[int]) -> None:
        """A later launch ran nothing (a search's trials skipped as done): the total is the jobs its sweeper now
        expects, and where that changes it the line says so again."""
        total = self.total if in_sweep is None else max(self.done + self.failed, in_sweep)
        if total != self.total:
            self.total = total
            if self.enabled:
                self._print()

    def job_started(self, job: Any) -> None:
        self.running.add(job.idx)

    def running_now(self, n_local: int) -> None:
        """Jobs running on local workers (queued ones are not counted)."""
        self.n_local = n_local

    def job_done(self, job: Any, ok: bool, line: str, seconds: float = 0.0) -> None:
        """`seconds`: the job's own (where it ran, start-up not counted), for the ETA."""
        self.running.discard(job.idx)
        if seconds > 0:
            self.took.append(seconds)
            if job.idx in self.expected:
                self.took_vs_expected[0] += seconds
                self.took_vs_expected[1] += self.expected[job.idx]
        self.expected.pop(job.idx, None)  # what is left in it: the unfinished jobs
        if ok:
            self.done += 1
        else:
            self.failed += 1
        _say(line, sys.stdout if ok else sys.stderr)  # (stdout: above the bar on a terminal)
        self.refresh()

    def n_running(self) -> int:
        return self.n_local + len(self.running)

    def eta_s(self) -> Optional[float]:
        """Seconds left: the jobs left at their expected seconds over the worker slots (module docstring); None
        with nothing to go by (no job finished, none expected)."""
        left = self.total - self.done - self.failed
        if left <= 0:
            return 0.0
        taken, was_expected = self.took_vs_expected
        expected_left = sum(self.expected.values())
        scale = 1.0
        if taken and was_expected:  # trusted as far as the expected work is done: a few first jobs sway it little
            scale += (taken / was_expected - 1.0) * was_expected / (was_expected + expected_left)
        known = scale * expected_left
        each = sum(self.took) / len(self.took) if self.took else None
        if each is None and self.expected:
            each = known / len(self.expected)
        if each is None:
            return None
        return (known + each * max(0, left - len(self.expected))) / min(self.slots, left)

    def estimate(self) -> str:
        """The line a sweep starts with: its seconds from the jobs' earlier runs; jobs that never ran are not
        guessed at (each was the others' mean: "estimate <1s" for a first mlp_lm run beside a bigram's)."""
        known = len(self.expected)
        if not known:  # a preset's first run into a new store said nothing until its first job ended
            return (
                f"{self.title}: {self.total} job(s) on {min(self.slots, self.total)} worker slot(s); none ran here "
                "before: no estimate until the first ends (then the ETA)"
            )
        if known >= self.launched:
            return (
                f"{self.title}: estimate {duration(self.eta_s() or 0.0)} for {self.total} job(s) on "
                f"{min(self.slots, self.total)} worker slot(s), from the seconds earlier runs took"
            )
        seconds = sum(self.expected.values()) / min(self.slots, known)
        return (
            f"{self.title}: estimate {duration(seconds)} for {known} of the {self.launched} job(s), from the "
            f"seconds earlier runs of them took; the other {self.launched - known} never ran here: no estimate for them"
        )

    def eta(self) -> str:
        eta = self.eta_s()
        return "?" if eta is None else duration(eta)

    def line(self) -> str:
        return (
            f"{self.title} {self.done + self.failed}/{self.total} · {self.done} done · {self.failed} failed · "
            f"{self.n_running()} running · ETA {self.eta()}"
        )

    def refresh(self, force: bool = False) -> None:
        now = self.clock()
        if self._bar is not None:
            if force or now - self._last >= 0.1:  # cheap for 1000s of fast jobs
                self._last = now
                self._bar.update(
                    self._task,
                    completed=self.done + self.failed,
                    done=self.done,
                    failed=self.failed,
                    running=self.n_running(),
                    eta=self.eta(),
                )
        elif self.enabled and now - self._last_plain >= self.PLAIN_EVERY_S:
            self._last_plain = now
            self._print()

    def _print(self) -> None:
        self._printed = self.line()
        _say(self._printed)


def _say(line: str, out: Any = None) -> None:
    """`line` and its newline (on stderr by default) in one write: print writes them apart, a signal's handler,
    which runs between the two, printed its own line after the text and before the newline (`... ETA
    0ssweep: interrupted`), and the workers share the stream. Its reader gone (`| head`), the sweep stops as for
    SIGPIPE (`output_closed`), where the BrokenPipeError's traceback left the parent run RUNNING."""
    out = sys.stderr if out is None else out
    try:
        out.write(line + "\n")
        out.flush()
    except BrokenPipeError:
        raise output_closed() from None
