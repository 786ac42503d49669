"""Live progress: done / failed / running / ETA. A rich bar on a terminal; elsewhere (CI, pipes) a plain line
on stderr every few seconds, and each job's summary line on stdout."""
from __future__ import annotations

import sys
import time
from typing import Any, Optional


class Progress:
    PLAIN_EVERY_S = 5.0

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total = total
        self.done = self.failed = 0
        self.running: set[int] = set()  # remote jobs in flight
        self.n_local = 0
        self.t0 = time.monotonic()
        self._last = 0.0
        self._last_plain = time.monotonic()
        self.enabled = enabled
        self._bar: Optional[Any] = None
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(),
                TextColumn("done {task.fields[done]}  failed {task.fields[failed]}  "
                           "running {task.fields[running]}  ETA"), TimeRemainingColumn(),
                console=Console(stderr=True), redirect_stdout=True, redirect_stderr=True)
            self._task = self._bar.add_task("sweep", total=total, done=0, failed=0, running=0)

    def __enter__(self) -> "Progress":
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self.refresh(force=True)
            self._bar.stop()

    def job_started(self, job: Any) -> None:
        self.running.add(job.idx)

    def running_now(self, n_local: int) -> None:
        """Jobs running on local workers (queued ones are not counted)."""
        self.n_local = n_local

    def job_done(self, job: Any, ok: bool, line: str) -> None:
        self.running.discard(job.idx)
        if ok:
            self.done += 1
        else:
            self.failed += 1
        print(line, file=sys.stdout if ok else sys.stderr, flush=True)  # above the bar on a terminal
        self.refresh()

    def n_running(self) -> int:
        return self.n_local + len(self.running)

    def eta_s(self) -> Optional[float]:
        n = self.done + self.failed
        if not n:
            return None
        return (time.monotonic() - self.t0) / n * (self.total - n)

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._bar is not None:
            if force or now - self._last >= 0.1:  # cheap for 1000s of fast jobs
                self._last = now
                self._bar.update(self._task, completed=self.done + self.failed, done=self.done,
                                 failed=self.failed, running=self.n_running())
        elif self.enabled and now - self._last_plain >= self.PLAIN_EVERY_S:
            self._last_plain = now
            eta = self.eta_s()
            print(f"sweep: {self.done + self.failed}/{self.total} done {self.done} failed {self.failed} "
                  f"running {self.n_running()} ETA {'?' if eta is None else f'{eta:.0f}s'}",
                  file=sys.stderr, flush=True)
