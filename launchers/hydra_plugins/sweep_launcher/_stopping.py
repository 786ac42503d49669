"""The end of a sweep that cannot go on (a signal, a closed output, hooks that fail): what runs is killed and
recorded KILLED, what had come back is recorded as it ended, and the command exits with one line. The
dispatcher's (`_dispatch.Dispatcher`) own part, kept apart from its loop."""

from __future__ import annotations

import sys
from typing import Any

from hydra_plugins.sweep_launcher._batches import leading
from hydra_plugins.sweep_launcher._signals import Interrupt, Interrupted
from hydra_plugins.sweep_launcher.hooks import Outcome


class HooksFailed(Exception):
    """The app's hooks raised while taking a result (its store cannot be written): the sweep stops."""


class CannotGoOn(Exception):
    """A job's failure that every later job would meet (`Reply.stop`: the jobs' directories' disk full): the sweep
    stops, where it went on failing each of its remaining jobs alike."""


class Stopping:
    """Mixed into the dispatcher, whose loop, workers, results and hooks these read."""

    arrived: Any
    returns: Any
    interrupt: Any

    def _take_arrived(self: Any) -> None:
        """A stop came while results that had come back were handed over one by one: the rest are recorded as they
        ended (a signal or a closed output left them out of every count, recorded neither FINISHED nor KILLED)."""
        Interrupt.ignore()  # a second signal must not cut these records short
        self.interrupt.requested = 0  # (the stop is under way: `_take` must not raise it again)
        for job, reply in [a for a in self.arrived if a[0].idx not in self.returns]:  # (recorded: its line stopped)
            try:
                self._handle(job, reply)
            except Interrupted:  # its line's stream closed too: it is recorded all the same
                pass
        self.arrived.clear()

    def _stop_all(self: Any) -> tuple[list, int]:
        """Kill what runs; (the jobs that were running, how many never started)."""
        Interrupt.ignore()  # a second signal must not cut the recording short
        self.stop.set()
        busy = self._busy()
        running = [j for w in busy for j in leading(w.jobs)] + [j for j in self.remote if j.idx not in self.returns]
        not_started = len(self.local) + sum(len(w.jobs) - len(leading(w.jobs)) for w in busy)
        if self.pool is not None:
            self.pool.close(kill=True)  # SIGKILL: nothing of a running job may go on
        self.tally.close()
        return running, not_started

    def _interrupted(self: Any, e: Interrupted) -> None:
        running, not_started = self._stop_all()
        for job in running:
            try:
                why = f"interrupted ({e.name})"
                self._tell(job, Outcome("KILLED", None, reason=why, error=f"{why} while the job was running\n"))
            except HooksFailed:
                break
        self.tally.killed += len(running)
        killed = f"{len(running)} running job(s) recorded KILLED, {not_started} not started"
        print(f"\nsweep: interrupted by {e.name}: {killed}", file=sys.stderr, flush=True)
        for h in self.hooks:
            h.sweep_ended("KILLED", self.tally)
        raise SystemExit(e.exit_code)

    def _cannot_go_on(self: Any, why: str) -> None:
        """Running jobs killed and recorded KILLED, the sweep told FAILED (the hooks can still write), exit 1."""
        running, not_started = self._stop_all()
        for job in running:
            try:
                self._tell(job, Outcome("KILLED", None, reason=why, error=f"stopped: {why}\n"))
            except HooksFailed:
                break
        self.tally.killed += len(running)
        print(
            f"sweep: stopped: {why} ({len(running)} running job(s) recorded KILLED, {not_started} not started); "
            "make room and run this command again (what is done is skipped)",
            file=sys.stderr,
            flush=True,
        )
        for h in self.hooks:
            h.sweep_ended("FAILED", self.tally)
        raise SystemExit(1)

    def _abort(self: Any, why: str) -> None:
        running, not_started = self._stop_all()
        print(
            f"sweep: stopped: {why} ({len(running)} running job(s) killed, {not_started} not started)",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1)
