"""The store's generated secrets, each made once and kept in <data_dir>/secrets/ (mode 600, this user only): the
database role's password, the key MLflow signs its login forms with, and an admin password nobody gave."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def private_file(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by this user only from the first byte on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def kept(data_dir: Path, name: str) -> Path:
    return data_dir / "secrets" / name


def kept_secret(data_dir: Path, name: str) -> str:
    """The secret `name`, made on first use."""
    path = kept(data_dir, name)
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        private_file(path, secrets.token_urlsafe(24))
    return path.read_text().strip()
