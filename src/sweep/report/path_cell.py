"""A terminal cell holding a path (a challenge entrant, `examples/solvers/python_lists.py:solve`) that wraps after
its separators, as a path reads, not mid-name: rich breaks a cell only at spaces, so a path folded wherever the
column ended ("examples/solvers/python_lists.py:so" / "lve"). A piece wider than the column still folds."""

from __future__ import annotations

import re
from typing import Any

from rich.cells import cell_len
from rich.containers import Lines
from rich.measure import Measurement
from rich.text import Text

# a path's pieces, each with the separator (or the spaces) it ends with: "examples/" "solvers/" "honest.py:" "solve"
PIECE = re.compile(r"[^/:\s]*(?:[/:]|\s+|$)")


def pieces(text: str) -> list[tuple[int, str]]:
    """(start, piece) of each piece of `text`, in order."""
    return [(m.start(), m[0]) for m in PIECE.finditer(text) if m[0]]


class PathCell(Text):
    def wrap(self, console: Any, width: int, **kwargs: Any) -> Lines:
        """Lines of at most `width` cells, broken after a separator where the next piece would overflow."""
        if kwargs.get("no_wrap") or self.no_wrap:
            return super().wrap(console, width, **kwargs)
        breaks, used = [], 0
        for start, piece in pieces(self.plain):
            if used and used + cell_len(piece.rstrip()) > width:
                breaks.append(start)
                used = 0
            used += cell_len(piece)
        lines = Lines()
        for line in self.divide(breaks):
            lines.extend(Text.wrap(line, console, width, **kwargs))  # (a piece wider than the column folds)
        return lines

    def __rich_measure__(self, console: Any, options: Any) -> Measurement:
        """The least width: the widest piece (the column is never narrowed below a whole piece by choice)."""
        widest = max((cell_len(p.rstrip()) for _, p in pieces(self.plain)), default=0)
        return Measurement(widest, max(cell_len(line) for line in self.plain.splitlines() or [""]))
