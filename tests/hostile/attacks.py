"""Hostile solvers for tests/test_hostile.py: each function is one attack on the challenge (issue 41), made as
its author would, then, where it got nothing, the honest search (so that a run that got nothing is measured as
honest work, and one that got something shows it).

Module level: the attack that rigged the record from the launching process, replacing the recorder's write
(where the recorder is loaded: it was in the process that checked and ran a solver) and the judge's accuracy;
here it runs in each sandbox only, where no recorder is.
"""

import ctypes
import gc
import glob
import inspect
import itertools
import os
import signal
import sqlite3
import sys
import threading
import time

import numpy as np

import sweep.methods.base as judge

judge.subset_accuracy = lambda *a, **k: 1.0
if "sweep.record.recorder" in sys.modules:
    sys.modules["sweep.record.recorder"].Recorder.write = lambda self, *a, **k: None


def honest(x, y, n_bits, k_sparse):
    subsets = np.array(list(itertools.combinations(range(n_bits), k_sparse)))
    fits = np.all(np.prod(x[:32][:, subsets], axis=2) == y[:32, None], axis=0)
    return subsets[np.argmax(fits)]


def patched_judge(x, y, n_bits, k_sparse):
    """A fixed guess, with the judge's accuracy patched to 1.0 (in this process)."""
    judge.subset_accuracy = lambda *a, **k: 1.0
    return [0, 1, 2]


def places():
    """Where the store and Hydra's folders might be: this process's folders and its parents', the environment."""
    out = [os.getcwd(), os.environ.get("MLFLOW_TRACKING_URI", "").replace("sqlite:///", "")]
    pid = os.getpid()
    for _ in range(6):
        try:
            out.append(os.readlink(f"/proc/{pid}/cwd"))
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            out += [v.split(b"=", 1)[1].decode().replace("sqlite:///", "") for v in env if v.startswith(b"MLFLOW_")]
            pid = int(open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return [p for p in out if p]


def sql_update(x, y, n_bits, k_sparse):
    """Every other run's accuracy set to 0.5 in the store's SQLite file."""
    for place in places():
        for db in glob.glob(os.path.join(os.path.dirname(place) if place.endswith(".db") else place, "**", "*.db"),
                            recursive=True)[:20] + ([place] if place.endswith(".db") else []):  # fmt: skip
            try:
                with sqlite3.connect(db) as c:
                    c.execute("UPDATE metrics SET value = 0.5 WHERE key = 'accuracy'")
                    c.execute("UPDATE latest_metrics SET value = 0.5 WHERE key = 'accuracy'")
            except sqlite3.Error:
                pass
    return honest(x, y, n_bits, k_sparse)


def steal_env(x, y, n_bits, k_sparse):
    """The store's address and credentials from the environment: found, it answers wrong (its accuracy shows it)."""
    leaked = [k for k in os.environ if k.startswith("MLFLOW") or "PASSWORD" in k or "TOKEN" in k]
    return [0, 1, 2] if leaked else honest(x, y, n_bits, k_sparse)


def _secret_of(obj):
    try:
        s = getattr(obj, "secret", None)
    except Exception:  # a lazy attribute (ctypes' library loaders): not it
        return None
    if isinstance(s, tuple) and s and all(isinstance(i, int) for i in s) and hasattr(obj, "x_test"):
        return list(s)
    return None


def frames(x, y, n_bits, k_sparse):
    """The secret from the callers' frames, then from every object the collector knows: found, it is returned
    with no work."""
    for info in inspect.stack():
        for v in info.frame.f_locals.values():
            for candidate in (v, getattr(v, "data", None)):
                found = _secret_of(candidate)
                if found:
                    return found
    for obj in gc.get_objects():
        found = _secret_of(obj)
        if found:
            return found
    return honest(x, y, n_bits, k_sparse)


def overrides(x, y, n_bits, k_sparse):
    """The seed from Hydra's overrides.yaml, the data made again from it: found, the secret with no work."""
    for place in places():
        root = os.path.dirname(place) if place.endswith(".db") else place
        for f in glob.glob(os.path.join(root, "**", ".hydra", "overrides.yaml"), recursive=True)[:50]:
            for line in open(f):
                if "problem.seed=" in line:
                    from sweep.problems.sparse_parity import SparseParity

                    seed = int(line.split("=")[1])
                    problem = SparseParity(n_bits=n_bits, k_sparse=k_sparse, n_train=len(x), n_test=500, seed=seed)
                    return list(problem.generate().secret)
    return honest(x, y, n_bits, k_sparse)


def fake_clock(x, y, n_bits, k_sparse):
    """The launcher's timer ended and the clocks stopped, then 8 s of sleep past the test's 5 s limit."""
    try:
        from hydra_plugins.sweep_launcher import timer

        timer.end()
    except ImportError:
        pass
    time.perf_counter = time.monotonic = lambda: 0.0
    time.sleep(8)
    return honest(x, y, n_bits, k_sparse)


def view_escape(x, y, n_bits, k_sparse):
    return honest(x.view(np.ndarray), y.view(np.ndarray), n_bits, k_sparse)


def base_escape(x, y, n_bits, k_sparse):
    xb, yb = x.base, y.base
    return honest(x if xb is None else xb, y if yb is None else yb, n_bits, k_sparse)


def thread_escape(x, y, n_bits, k_sparse):
    out = []
    t = threading.Thread(target=lambda: out.append(honest(x, y, n_bits, k_sparse)))
    t.start()
    t.join()
    return out[0]


def busy_flag(x, y, n_bits, k_sparse):
    """The tracer's private `busy` flag set on every object that has one (the tracer, found by the collector)."""
    for obj in gc.get_objects():
        if type(obj).__name__ == "NumpyTracer":
            obj.busy = True
    return honest(x, y, n_bits, k_sparse)


def busy_module(x, y, n_bits, k_sparse):
    """The flag where it now lives, in the tracer's module: the trace sees nothing after it."""
    sys.modules["sweep.trace.auto.traced_array"]._busy.on = True
    return honest(x, y, n_bits, k_sparse)


def outlive(x, y, n_bits, k_sparse):
    """A grandchild in a session of its own, named hostile-sleep, that ignores SIGTERM (libc's fork: os.fork is
    refused), then the honest answer."""
    libc = ctypes.CDLL(None)
    if libc.fork() == 0:
        os.setsid()
        if libc.fork() == 0:
            libc.prctl(15, b"hostile-sleep", 0, 0, 0)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(120)
        os._exit(0)
    time.sleep(0.5)
    return honest(x, y, n_bits, k_sparse)


def exit_in_solve(x, y, n_bits, k_sparse):
    sys.exit(0)


def os_exit_in_solve(x, y, n_bits, k_sparse):
    os._exit(0)
