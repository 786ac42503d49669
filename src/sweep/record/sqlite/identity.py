"""A store file's identity (its device and inode): what tells that the file a command opened was removed or replaced
under it, as SQLite, writing on into the unlinked file, would not."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


def file_identity(path: Path) -> Optional[tuple[int, int]]:
    """The file at `path` (its device and inode), or None where there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def moved(path: Path, opened: Optional[tuple[int, int]]) -> Optional[str]:
    """Why the store at `path` is no longer the file this command opened (`file_identity` then), or None."""
    if opened is None or file_identity(path) == opened:
        return None
    return f"its file {path} was removed or replaced while this command was writing it"
