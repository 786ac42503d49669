"""How the sandboxed child is started: under bubblewrap where it runs, else as a plain process (the fallback).

Both: a fresh interpreter (`python -I`, started by subprocess: nothing of the parent's memory), an environment
of its own (no MLFLOW_*, no credentials, no store address: only what is listed in ENV), its working directory an
empty temporary one, its own session and process group.

With bubblewrap (`bwrap`, Debian's bubblewrap): no network, its own PID, IPC, UTS and user namespaces (as
`nobody`, no capabilities) and `--die-with-parent`, so every process the entrant starts dies with the sandbox;
a filesystem that holds only the interpreter, the folders on its `sys.path` (the project's code, its
site-packages), the entrant's file or package (all read-only), /dev, /proc, an empty temporary folder and the
working directory. The store, the config, Hydra's job folders and the user's home are not there to be read.

The fallback (`SWEEP_SANDBOX=process`, or where bwrap is missing or cannot start: one warning line) keeps the
process, the environment, the working directory and the limits, but not the filesystem's or the network's
isolation: the entrant runs as the user who runs the sweep and can read what that user can. Its process group is
killed at the end, and the parent made a subreaper collects what left the group (docs/challenge.md).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from sweep.errors import ConfigError

ISOLATION_ENV = "SWEEP_SANDBOX"  # bwrap (the default, where it runs) | process (the fallback)
CHOICES = ("bwrap", "process")
# the child's whole environment: one thread per numerical library (its CPU limit is the process's), a UTF-8 locale
ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


def mode() -> str:
    """bwrap or process: what `SWEEP_SANDBOX` asks for (ConfigError naming it otherwise), bwrap falling back."""
    asked = os.environ.get(ISOLATION_ENV, "bwrap") or "bwrap"
    if asked not in CHOICES:
        raise ConfigError(f"{ISOLATION_ENV}={asked!r} is not allowed: expected one of {', '.join(CHOICES)}")
    if asked == "bwrap" and bwrap_missing() is not None:
        return "process"
    return asked


@functools.lru_cache(maxsize=1)
def bwrap_missing() -> str | None:
    """Why bwrap cannot sandbox here (None: it can), said once per process on stderr."""
    exe = shutil.which("bwrap")
    why = None
    if exe is None:
        why = "bwrap is not installed (Debian: apt-get install bubblewrap)"
    else:
        p = subprocess.run(
            [exe, "--ro-bind", "/", "/", *NAMESPACES, "true"], capture_output=True, text=True, timeout=30
        )
        if p.returncode != 0:
            why = f"bwrap cannot start here: {(p.stderr.strip().splitlines() or ['exit ' + str(p.returncode)])[-1]}"
    if why:
        print(f"sweep: {why}; entrants run as plain processes, without the filesystem's and the network's "
              f"isolation (docs/challenge.md)", file=sys.stderr, flush=True)  # fmt: skip
    return why


NAMESPACES = ("--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534", "--die-with-parent")


@functools.lru_cache(maxsize=1)
def child_sys_path() -> tuple[str, ...]:
    """The folders `python -I` puts on its sys.path here (the stdlib, site-packages, the editable installs')."""
    out = subprocess.run(
        [sys.executable, "-I", "-c", "import sys, json; print(json.dumps(sys.path))"],
        capture_output=True, text=True, check=True, env=ENV, timeout=60,
    )  # fmt: skip
    return tuple(p for p in json.loads(out.stdout) if p and os.path.exists(p))


def command(how: str, work: Path, seen: Sequence[Path], limits: dict, disk_bytes: int) -> list[str]:
    """The child's command line: under bwrap (`how`), seeing `seen` read-only and `work` as its working
    directory, in a tmpfs of `disk_bytes` that is all it may write, or plain."""
    python = [sys.executable, "-I", "-m", "sweep.sandbox.child", json.dumps(limits)]
    if how != "bwrap":
        return python
    args = ["bwrap", *NAMESPACES, "--new-session", "--proc", "/proc", "--dev", "/dev"]
    # empty, and all it may write: the working directory is made inside it (not the host's, bound: unbounded)
    args += ["--size", str(disk_bytes), "--tmpfs", tempfile.gettempdir()]
    for d in ("/bin", "/lib", "/lib32", "/lib64", "/sbin"):
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    paths = {"/usr", "/etc/ld.so.cache", sys.prefix, sys.base_prefix, *child_sys_path(), *map(str, seen)}
    paths |= {os.path.dirname(sys.executable), os.path.realpath(sys.executable)}
    folders = [q.rstrip("/") + "/" for q in paths if os.path.isdir(q)]
    for p in sorted(paths, key=lambda p: (p.count("/"), p)):
        if os.path.exists(p) and not any(p.startswith(q) for q in folders if q != p.rstrip("/") + "/"):
            args += ["--ro-bind", p, p]  # a folder's own contents come with it
    args += ["--dir", str(work), "--chdir", str(work), "--setenv", "HOME", str(work)]
    return [*args, "--", *python]
