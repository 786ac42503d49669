"""Ctrl-C, SIGTERM and SIGHUP stop a sweep the same way: the launcher raises `Interrupted` in its main loop
(never in the middle of recording a result), kills the running jobs, records them KILLED and exits 128+signal
(130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP), as a shell reports a process killed by that signal."""

from __future__ import annotations

import signal
import threading
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(NAMES.get(signum, str(signum)))
        self.signum = signum

    @property
    def name(self) -> str:
        return NAMES.get(self.signum, f"signal {self.signum}")

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum)


class Interrupt:
    """Context: while inside, the three signals raise `Interrupted`, except while `in_write` (the raise then
    waits for `check()`, called once the write is done)."""

    def __init__(self) -> None:
        self.requested: int = 0
        self.in_write = False
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> "Interrupt":
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self.previous[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h)
        self.previous = {}

    def _handler(self, signum: int, frame: Any) -> None:
        if self.requested:
            return  # a second signal must not cut the recording of the first short
        self.requested = signum
        if not self.in_write:
            raise Interrupted(signum)

    def check(self) -> None:
        if self.requested:
            raise Interrupted(self.requested)

    @staticmethod
    def ignore() -> None:
        """While the launcher records an interrupted sweep: further signals wait."""
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                signal.signal(s, signal.SIG_IGN)
