"""Ctrl-C, SIGTERM, SIGHUP and Ctrl-\\ (SIGQUIT) stop a sweep the same way: the launcher raises `Interrupted` in its
main loop (never in the middle of recording a result), kills the running jobs, records them KILLED and exits
128+signal (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP, 131 for SIGQUIT), as a shell reports a process killed
by that signal.

Before the loop and after it the launching process listens too, so a signal is never lost: before any job
(`listen`: an app's composition, the check of every job, the making of its records) it raises `Interrupted`
where the process is, and the launcher ends the sweep before any job starts; a signal that a callback swallowed
there (Python prints "Exception ignored in ..." for an exception raised inside a weakref callback or `__del__`)
is still noted, and acted on at the next step (`check_pending`). After the loop (`hold`: the workers stopped, the
app's records closed) it waits: the sweep ends as it would have, then the command stops with the signal's exit
code (`exit_if_signalled`).

A closed output (`sweep -m ... | head`: the reader of stdout or stderr ended) stops a sweep as SIGPIPE stops a
shell's writer, the same way as the stop signals (`output_closed`): exit 141, nothing lost, no traceback."""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

# the signals that stop a command cleanly, the one list every handler of the project's commands installs (the
# launcher's, a store's making, the recorder's background writes, the server's, an owned process's). SIGQUIT
# (Ctrl-\) asks for a core dump by default and left a finished sweep's parent RUNNING; as for nginx, it is a stop
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# the ones a terminal sends its whole foreground group (Ctrl-C, Ctrl-\): a worker leaves them to its launcher
FROM_TERMINAL = (signal.SIGINT, signal.SIGQUIT)
NAMES = {
    signal.SIGINT: "Ctrl-C",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP",
    signal.SIGQUIT: "Ctrl-\\ (SIGQUIT)",
    signal.SIGPIPE: "a closed output (SIGPIPE: the reader of its output ended)",
}
_pending: list[int] = []  # a signal that came outside the loop and has not stopped the command yet
_before_hold: dict[int, Any] = {}  # the handlers `hold` replaced, put back by `exit_if_signalled`
_recorded: list[str] = []  # once the sweep is recorded: where a signal from then on comes (`Interrupted.line`)


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

    @property
    def line(self) -> str:
        """What the command says as it stops: once the sweep is recorded (a signal during the command's last
        steps, after `exit_if_signalled`), that it came after the last job and nothing was lost."""
        return f"sweep: interrupted by {self.name}" + (f" {_recorded[0]}" if _recorded else "")


class Interrupt:
    """Context: while inside, the stop signals (SIGNALS) raise `Interrupted`, except while `in_write` (the raise then
    waits for `check()`, called once the write is done)."""

    def __init__(self, hold_after: bool = False) -> None:
        self.requested: int = 0
        self.in_write = False
        self.previous: dict[int, Any] = {}
        self.hold_after = hold_after  # after the loop a signal waits (`hold`): hooks will close the sweep

    def __enter__(self) -> "Interrupt":
        _recorded.clear()  # a sweep begins (another, in a process that goes on): not recorded yet
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self.previous[s] = signal.signal(s, self._handler)
        check_pending()  # one that came before the loop and was held (between a search's batches)
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h)
        self.previous = {}
        if exc_type is None and self.hold_after:  # the loop is over: a signal waits until the hooks close the sweep
            hold()

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


def _reader_gone(fd: int) -> bool:
    """The pipe that `fd` writes into has no reader left (poll says POLLERR; a file or a terminal never does)."""
    try:
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poll.poll(0))
    except (OSError, ValueError):
        return False


def reader_gone() -> bool:
    """Whether stdout's reader has ended (`| head` done): for output written through `logging`, which reports a
    BrokenPipeError as a traceback per record rather than raising it."""
    try:
        return _reader_gone(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        return False


def output_closed() -> Interrupted:
    """A write found its reader gone (BrokenPipeError): the command stops as for SIGPIPE, which Python ignores.
    Each stream whose reader is gone (stdout; stderr too under `2>&1 | head`) writes to /dev/null from here, so
    the lines that stop the sweep and close its records cannot fail the same way half-way."""
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):  # replaced by a test's capture, or closed
            continue
        if _reader_gone(fd):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)
    return Interrupted(signal.SIGPIPE)


def _note(signum: int) -> None:
    if not _pending:
        _pending.append(signum)


def _listening(signum: int, frame: Any) -> None:
    _note(signum)
    raise Interrupted(signum)


def _holding(signum: int, frame: Any) -> None:
    _note(signum)


def _install(handler: Any) -> dict[int, Any]:
    """`handler` for the stop signals, SIGNALS (in the main thread: elsewhere signals do not reach Python); the handlers
    it replaces."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, handler) for s in SIGNALS}


def _listen_quietly(handler: Any) -> dict[int, Any]:
    """`_install(handler)`, and Python's report of an exception a callback could not raise ("Exception ignored in:
    <function _get_module_lock.<locals>.cb>", a traceback) left out for a stop signal's: that one is noted and
    acted on where the process goes on (`check_pending`, `starting`), in its one line. Other reports go on as
    before."""
    shown = sys.unraisablehook
    if not getattr(shown, "leaves_out_stop_signals", False):

        def quiet(u: Any) -> None:
            if not isinstance(u.exc_value, Interrupted):
                shown(u)

        quiet.leaves_out_stop_signals = True  # type: ignore[attr-defined]
        sys.unraisablehook = quiet
    return _install(handler)


def leave_to_launcher() -> None:
    """In a worker: the terminal's signals (FROM_TERMINAL, sent to the whole foreground group) are its launcher's to
    answer; SIGTERM and SIGHUP, sent to the worker alone, end it."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN if s in FROM_TERMINAL else signal.SIG_DFL)


@contextmanager
def listening() -> Iterator[None]:
    """`listen` for a command's main, the handlers before it put back after (a caller that goes on, a test's, keeps
    its own)."""
    before = {s: signal.getsignal(s) for s in SIGNALS}
    listen()
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)


def listen() -> None:
    """From here the stop signals raise `Interrupted` where the process is (and are noted: `check_pending`)."""
    _recorded.clear()
    _listen_quietly(_listening)


def hold() -> None:
    """From here the stop signals are noted and wait (`exit_if_signalled`, which puts back what was before)."""
    previous = _install(_holding)
    if not _before_hold:
        _before_hold.update((s, h) for s, h in previous.items() if h is not _holding)


def defer(signum: int) -> None:
    """A signal that came once every job was recorded: the sweep ends as it would have (its hooks close it as
    FINISHED or FAILED, not KILLED), then the command stops with the signal's exit code (`exit_if_signalled`)."""
    hold()
    _note(signum)


def take() -> "Interrupted | None":
    """The signal noted and not acted on yet, as the exception that acts on it (now forgotten), or None."""
    return Interrupted(_pending.pop()) if _pending else None


def check_pending() -> None:
    """Raise `Interrupted` for a signal noted and not acted on (one whose exception a callback swallowed)."""
    e = take()
    if e is not None:
        raise e


def as_interrupted(e: KeyboardInterrupt) -> Interrupted:
    """A KeyboardInterrupt as the signal it stands for (Python's own SIGINT handler raises a plain one), its note
    forgotten: it is being answered (a process that goes on, a test's, must not meet it again at `check_pending`)."""
    if isinstance(e, Interrupted):
        if _pending[:1] == [e.signum]:
            _pending.pop()
        return e
    noted = take()
    return noted if noted is not None else Interrupted(signal.SIGINT)


def exit_if_signalled(where: str) -> None:
    """The sweep is over: the handlers `hold` replaced are back (a process that goes on, such as a test's, keeps
    its own), and a signal held until now stops the command: one line (`where` it came), exit 128+signal. A
    signal after this (the command's last steps) says the same `where` (`Interrupted.line`)."""
    _recorded[:] = [where]
    for s, h in _before_hold.items():
        if threading.current_thread() is threading.main_thread():
            signal.signal(s, signal.SIG_DFL if h is None else h)  # None: a handler not set from Python
    _before_hold.clear()
    e = take()
    if e is not None:
        print(e.line, file=sys.stderr, flush=True)
        raise SystemExit(e.exit_code)


@contextmanager
def starting(prog: str) -> Iterator[None]:
    """Around a command's imports (seconds of Hydra, MLflow, torch before its `main` listens): Ctrl-C, SIGTERM
    or SIGHUP there is one line, `<prog>: interrupted by <signal> while starting: nothing done`, and 128+signal,
    not an import's traceback; the handlers before it are back after. A working directory deleted under the
    shell that runs the command is one line too, before the imports (every path, Hydra's first, reads it: a
    traceback of 36 lines)."""
    try:
        os.getcwd()
    except FileNotFoundError:
        print(
            f"{prog}: the current directory no longer exists (it was removed after the shell entered it): cd to one "
            "that exists and run the command again",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1) from None
    previous = _listen_quietly(_listening)
    try:
        yield
    except KeyboardInterrupt as e:
        _stop_starting(prog, as_interrupted(e))
    except Exception:
        # the interrupt raised inside an import's cleanup (OmegaConf's flag_override, while Hydra's config store
        # is made) comes out as another error (AttributeError on a node left half-set): still the signal's doing
        if (noted := take()) is None:
            raise
        _stop_starting(prog, noted)
    finally:
        for s, h in previous.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)
    swallowed = take()  # one whose exception an import swallowed: it stops the command all the same
    if swallowed is not None:
        _stop_starting(prog, swallowed)


def _stop_starting(prog: str, e: Interrupted) -> None:
    print(f"{prog}: interrupted by {e.name} while starting: nothing done", file=sys.stderr, flush=True)
    raise SystemExit(e.exit_code) from None
