"""A report's file written whole or not at all: written aside, then renamed over its name (a disk that fills
mid-write left a 0-byte table.md beside a whole table.csv, and a cut one where the disk filled inside it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable


def written(path: Path, write: Callable[[Path], Any]) -> Path:
    """`write(aside)`, then the aside file renamed to `path`; on any failure the aside file is removed."""
    aside = path.with_name(f".{path.stem}.part{path.suffix}")  # the suffix kept: savefig reads its format there
    try:
        write(aside)
        os.replace(aside, path)
    except BaseException:
        aside.unlink(missing_ok=True)
        raise
    return path


def text(path: Path, content: str) -> Path:
    return written(path, lambda p: p.write_text(content))
