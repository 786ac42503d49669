"""A tracking server's runs written in the background: the launching process hands each result over and goes on
with the next jobs, while a few threads write the runs, their requests overlapping.

A run costs a server a handful of requests (the run, its batch, its files, its end), tens of milliseconds each
through the login and permission checks; written one after another in the launching process they would set the
sweep's pace. The promises of a synchronous write hold: a run the server refuses or cannot take is kept in the
spool (`Recorder.log`) and the command fails loudly, at the next result handed over or at the end (`flush`);
at most `PENDING` results wait at once (the launcher waits for room rather than piling them up); the end of a
sweep, interrupted or not, waits for every run (`flush`), and `close` leaves no thread behind.
"""

from __future__ import annotations

import contextlib
import copy
import signal
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Iterator, Optional

from hydra_plugins.sweep_launcher.api import SIGNALS
from sweep.record.store import StoreError
from sweep.result import RunResult

WRITERS = 4  # runs written at once: sweep.server's default worker processes
PENDING = 2 * WRITERS  # results handed over and not yet written, at most


class BackgroundWriter:
    """Writes a recorder's runs on `WRITERS` threads; `failures()` says which ones the store refused."""

    def __init__(self, recorder: Any, writers: int = WRITERS, pending: int = PENDING) -> None:
        self.recorder = recorder
        self._pool = ThreadPoolExecutor(max_workers=writers, thread_name_prefix="sweep-record")
        self._room = threading.BoundedSemaphore(pending)
        self._lock = threading.Lock()
        self._futures: set[Future] = set()
        self._refused: list[StoreError] = []

    def submit(
        self, result: RunResult, parent_run_id: Optional[str], run_name: Optional[str], tags: Optional[dict[str, str]]
    ) -> None:
        """Hand one result over (waits while `PENDING` are waiting already). A shallow copy is written: the
        caller may drop the result's config and curves (`RunResult.recorded`) as soon as this returns."""
        self._room.acquire()
        try:
            future = self._pool.submit(self._write, copy.copy(result), parent_run_id, run_name, tags)
        except BaseException:
            self._room.release()
            raise
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._done)

    def _write(self, result: RunResult, parent_run_id: Optional[str], run_name: Optional[str], tags: Any) -> None:
        try:
            # a run's own requests in turn: the runs written at once keep the server busy
            self.recorder.log(result, parent_run_id=parent_run_id, run_name=run_name, extra_tags=tags, at_once=False)
        except StoreError as e:  # kept in the spool already: said by whoever reads failures()
            with self._lock:
                self._refused.append(e)
        finally:
            self._room.release()

    def _done(self, future: Future) -> None:
        with self._lock:
            self._futures.discard(future)

    def failures(self) -> list[StoreError]:
        """The runs refused since the last call (each result kept in the spool: the error says where)."""
        with self._lock:
            out, self._refused = self._refused, []
        return out

    def flush(self) -> list[StoreError]:
        """Wait until every result handed over is written or kept; the refusals not said yet."""
        while True:
            with self._lock:
                futures = set(self._futures)
            if not futures:
                return self.failures()
            for f in wait(futures).done:
                f.result()  # a bug in the writing itself (not a refusal: those are kept) surfaces here

    def close(self) -> list[StoreError]:
        """`flush`, then the threads end."""
        try:
            return self.flush()
        finally:
            self._pool.shutdown(wait=True)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """The stop signals (Ctrl-C, SIGTERM, SIGHUP, Ctrl-\\) wait until the block is done, then act as they would
    have (in the main thread; elsewhere signals do not reach Python code). For the end of a sweep: the runs still
    being written are not cut short, and the command still stops (exit 130 / 143 / 129 / 131) once they are."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _frame: held.append(signum)) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)  # None: a handler not set from Python
        if held:
            signal.raise_signal(held[0])
