"""`python -m sweep` forked from a process that has its start done, rather than started afresh: of a refused
command's ~0.7 CPU s, ~0.5 s is the interpreter's start and the imports `sweep/__main__.py` makes before its
`main()` (Hydra, OmegaConf, numpy, the config schemas), and the suite runs hundreds of such commands.

The fork runs the module exactly as `python -m sweep ARGS` does (runpy, as `-m`), in the command's directory and
with its environment, its output into files, its status the fork's; a command that ends by a signal is `-signal`.
Only the imports made before `main()` are shared: each is a module `python -m sweep` imports at its top, read
nothing of the environment at import (but `SWEEP_ROOT`, compared below), and the fork does everything after them.
A command whose environment differs in what a start reads (PYTHON*, thread counts, SWEEP_ROOT, the loader's
settings) runs as a real process, as does every command where the process's start is the point (signals, the
console scripts, `ps`): those tests start their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])

# what a Python start or an import reads of the environment: a command whose value differs from the forking
# process's starts afresh
STARTUP = ("PYTHON", "SWEEP_ROOT", "OMP_", "OPENBLAS_", "MKL_", "LD_", "MALLOC_", "NUMPY_", "LANG", "LC_")

# the forking process: reads one request a line (argv, env, cwd, files), forks, answers the fork's pid and then
# its wait status; a fork runs `python -m sweep` in its place and never returns to the loop
SERVER = r"""
import json, os, runpy, sys
runpy.run_module("sweep", run_name="__forked__")  # the imports of sweep/__main__.py, main() not called
requests, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 1)
for line in requests:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        answers.close()
        os.dup2(null, 0)
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        os.close(null)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = [sys.argv[0], *req["argv"]]
        del requests, answers, line, req, pid
        runpy.run_module("sweep", run_name="__main__", alter_sys=True)
        sys.exit(0)
    answers.write(json.dumps({"pid": pid}) + "\n"); answers.flush()
    _, status = os.waitpid(pid, 0)
    answers.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n"); answers.flush()
"""

_server: subprocess.Popen | None = None
_lock = threading.Lock()


def _startup(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(STARTUP)}


# the session's environment, with the project first on PYTHONPATH (as conftest.run_sweep starts a command), before
# any test changed it: the server starts with it, and forks only commands whose start would read the same
PRISTINE = _startup({**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)})


def forkable(env: dict[str, str]) -> bool:
    """Whether `python -m sweep` with environment `env` may be forked from the server rather than started."""
    return os.environ.get("SWEEP_TEST_FORK", "1") != "0" and _startup(env) == PRISTINE


def _start(env: dict[str, str]) -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen(
            [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
        )
    return _server


def run(argv: list[str], cwd: Path | None, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`python -m sweep ARGV` forked, as subprocess.run(..., capture_output=True, text=True, timeout) answers."""
    with _lock, tempfile.TemporaryDirectory(prefix="forked-sweep-") as d:
        server = _start(env)
        out, err = Path(d) / "out", Path(d) / "err"
        req = {"argv": argv, "env": env, "cwd": str(cwd or Path.cwd()), "out": str(out), "err": str(err)}
        server.stdin.write(json.dumps(req) + "\n")
        server.stdin.flush()
        pid = json.loads(server.stdout.readline())["pid"]
        answer: list[str] = []
        reader = threading.Thread(target=lambda: answer.append(server.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not answer:
            os.kill(pid, signal.SIGKILL)
            reader.join()
            raise subprocess.TimeoutExpired([sys.executable, "-m", "sweep", *argv], timeout)
        code = json.loads(answer[0])["status"]
        args = [sys.executable, "-m", "sweep", *argv]
        return subprocess.CompletedProcess(args, code, out.read_text(), err.read_text())
