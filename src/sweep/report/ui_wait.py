"""Wait until a server we started answers over HTTP, so the addresses printed after it open at once (not with
"connection refused"): a progress line meanwhile (rich's spinner on a terminal, a plain line every few seconds
otherwise), and, if the server dies first, one line saying why. The server's output is held back while it starts
(the reason for a death is in it) and passed on to stderr once it answers, until `mute` is set: a server we stop
says so in its own lines (uvicorn's four of shutting down), where our one line is enough."""

from __future__ import annotations

import collections
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import nullcontext
from typing import IO

POLL_S, PROBE_TIMEOUT_S, PLAIN_EVERY_S = 0.3, 2.0, 5.0


class _Output:
    """The server's output, read on a thread: held (its last lines) until `forward()`, then copied to stderr."""

    def __init__(self, stream: IO[str], mute: threading.Event) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=50)
        self.forwarding, self.mute = threading.Event(), mute
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            if self.mute.is_set():
                continue
            if self.forwarding.is_set():
                sys.stderr.write(line)
                sys.stderr.flush()
            else:
                self.lines.append(line.rstrip())

    def forward(self) -> None:
        self.forwarding.set()

    def why(self) -> str:
        """The line that says why the server stopped: its last error line, else its last line."""
        self.thread.join(timeout=1)  # its end, unless a child of the dead server still holds the pipe
        lines = [s.strip() for s in self.lines if s.strip()]
        errors = [s for s in lines if "error" in s.lower() and not s.lower().startswith("running the mlflow")]
        return (errors or lines or ["no output"])[-1]


def answers(url: str) -> bool:
    """Whether the server answers `url` with 200 (a short timeout: a starting server refuses at once)."""
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as r:
            return r.status == 200
    except OSError:
        return False


def wait_until_serving(
    proc: subprocess.Popen, health_url: str, name: str, mute: threading.Event | None = None
) -> int | None:
    """Block until `health_url` answers (None: serving, its output now goes to stderr until `mute` is set) or
    `proc` exits first (1, after one line with its exit code and why). `proc`'s stdout must be a text pipe."""
    from rich.console import Console  # noqa: PLC0415 - rich: only when the progress line is drawn

    output = _Output(proc.stdout, mute if mute is not None else threading.Event())
    console = Console(stderr=True)
    start = time.monotonic()
    say = f"{name}: starting MLflow's server (its addresses follow once it answers)"
    status = console.status(say) if console.is_terminal else nullcontext()
    shown = start - PLAIN_EVERY_S  # the first plain line at once
    with status as spinner:
        while not answers(health_url):
            if proc.poll() is not None:
                print(
                    f"{name}: MLflow's server stopped (exit {proc.returncode}) before it answered: {output.why()}",
                    file=sys.stderr,
                    flush=True,
                )
                return 1
            now = time.monotonic()
            if spinner is not None:
                spinner.update(f"{say}: {now - start:.0f} s")
            elif now - shown >= PLAIN_EVERY_S:
                print(f"{say}: {now - start:.0f} s", file=sys.stderr, flush=True)
                shown = now
            time.sleep(POLL_S)
    output.forward()
    return None
