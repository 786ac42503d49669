"""Live progress on the terminal (stderr): done / failed / running / ETA, with rich."""
from __future__ import annotations

import sys
import time
from typing import Any, Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeRemainingColumn


class Progress:
    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total = total
        self.done = self.failed = 0
        self.running: set[int] = set()
        self.enabled = enabled
        self._bar: Optional[RichProgress] = None
        self._task: Any = None
        self._last = 0.0
        if enabled:
            self._bar = RichProgress(
                TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(),
                TextColumn("done {task.fields[done]}  failed {task.fields[failed]}  running {task.fields[running]}"),
                TextColumn("ETA"), TimeRemainingColumn(),
                console=Console(stderr=True), transient=False, redirect_stdout=True, redirect_stderr=False)
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

    def job_done(self, job: Any, ok: bool, line: str) -> None:
        self.running.discard(job.idx)
        if ok:
            self.done += 1
        else:
            self.failed += 1
        # rich's redirect_stdout prints above the live line; failures go to stderr
        print(line, file=sys.stdout if ok else sys.stderr, flush=True)
        self.refresh()

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._bar is None or (not force and now - self._last < 0.1):  # cheap for 1000s of fast jobs
            return
        self._last = now
        self._bar.update(self._task, completed=self.done + self.failed, done=self.done, failed=self.failed,
                         running=len(self.running))
