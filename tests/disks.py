"""Real filesystems for the store's edge tests: a small tmpfs that can be filled to the last byte, and a
read-only bind mount. Both need root and `mount` (CI runs as root); where mounting is impossible the test is
skipped, and says why."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (made if missing), unmounted after."""
    import pytest

    where.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({p.stderr.decode().strip()})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], check=True)


def fill(disk: Path) -> Path:
    """Fill the filesystem holding `disk` until it takes not one more byte; returns the filler file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for chunk in (1 << 16, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)
    return filler
