"""A tracking server that stopped answering, asked once per command: MLflow's client waits 3 x 60 s on each
request to a paused server, so a sweep's later writes (8 runs and the parent's end) took 11 minutes with no line.
The first write that gets no answer is remembered; every later one is kept in the spool at once."""

from __future__ import annotations

from typing import Callable, Optional

from sweep.record import remote


class ServerLost(Exception):
    """A write not tried: the tracking server did not answer an earlier one of this command."""


class Answering:
    """Whether the store's server answered this command's writes so far; `lost` says why not (`remote.unanswered`)."""

    def __init__(self) -> None:
        self.lost: Optional[str] = None

    def check(self) -> None:
        """Raises ServerLost where a write of this command found the tracking server not answering."""
        if self.lost is not None:
            raise ServerLost(f"{self.lost}, at an earlier write of this command: not asked again")

    def cause(self, e: BaseException, explain: Callable[[BaseException], str]) -> str:
        """The store's one line for a failed write (`explain`); a server that did not answer is remembered."""
        if isinstance(e, ServerLost):
            return str(e)
        why = remote.unanswered(e)
        if why is not None:
            self.lost = why
            return why
        return explain(e)
