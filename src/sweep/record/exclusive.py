"""One command at a time into a store from this machine (`exclusive`): the commands that read a store's runs
and then write on them (`sweep-store migrate`, `sweep-rescore`)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from typing import Iterator

from sweep.record import store
from sweep.record.registry import open_store


@contextlib.contextmanager
def exclusive(target_uri: str, command: str) -> Iterator[None]:
    """One `command` at a time into a store from this machine. Two migrates at once both planned before either
    copied, and each took the other's copies in progress for a cut-short migrate's (or copied every run twice);
    two sweep-rescores at once each read a run's figures before the other wrote them, and logged every point of
    every figure twice. An flock on a file named for the command and the target (in the machine's temporary
    directory, which every user can write), let go by the kernel however the process ends; StoreError while
    another process holds it."""
    identity = open_store(target_uri).identity()
    name = f"sweep-{command}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.lock"
    fd = _lock_file(os.path.join(tempfile.gettempdir(), name))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise store.StoreError(
                target_uri, f"another {command} into this store is running on this machine: run this one when it ends"
            ) from None
        yield
    finally:
        os.close(fd)


def _lock_file(path: str) -> int:
    """The lock file opened, or made readable by every user whatever this one's umask: another user's command opens
    the same file (one made 0600 refused every other user's migrate into the store for good). An existing file is
    opened without O_CREAT, which a sticky temporary directory refuses for another user's file (protected_regular)."""
    while True:
        try:
            return os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            pass
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue  # another migrate made it between the two
        os.fchmod(fd, 0o666)
        return fd
