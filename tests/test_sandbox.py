"""sweep.sandbox: a user's code in a fresh process of its own, with bubblewrap and in the fallback
(SWEEP_SANDBOX=process): what it sees, how each way out of it ends (one line), that nothing it started outlives it,
and the handle API the character challenge uses."""

from __future__ import annotations

import os
import pickle
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from sweep.errors import ConfigError
from sweep.sandbox import EntrantFailed, Limits, Sandbox, TimeLimit, isolation
from sweep.sandbox.wire import WireError, decode, encode

PROBE = Path(__file__).parent / "hostile" / "probe.py"


@pytest.fixture(params=["bwrap", "process"])
def how(request, monkeypatch):
    if request.param == "bwrap" and isolation.bwrap_missing():
        pytest.skip(isolation.bwrap_missing())
    monkeypatch.setenv(isolation.ISOLATION_ENV, request.param)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "hunter2")
    return request.param


def box(fn: str, **kw) -> Sandbox:
    return Sandbox(f"{PROBE}:{fn}", **kw).open()


def sleepers(token: str) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(int(pid))
        except OSError:
            pass
    return out


def test_what_the_child_sees_and_the_handle_api(how, tmp_path):
    secret = tmp_path / "mlflow.db"
    secret.write_text("the store")
    listener = socket.create_server(("127.0.0.1", 0))
    with box("peek") as b:
        assert b.how == how
        seen = b.call(str(secret), listener.getsockname()[1], timeout=30)
    listener.close()
    assert not any(k.startswith("MLFLOW") for k in seen["env"]) and "hunter2" not in str(seen["env"])
    assert seen["files"] == [] and "sweep-sandbox-" in seen["cwd"] and seen["cwd"] != os.getcwd()
    if how == "bwrap":  # the filesystem holds only what it needs, and there is no network
        assert seen["secret"] == "FileNotFoundError" and seen["net"] != "connected"
    else:  # the fallback: the user's files and the network are the user's (docs/challenge.md)
        assert seen["secret"] == "the store" and seen["net"] == "connected"
    with box("build") as b:
        h = b.call(2, timeout=30, keep=True)
        b.method(h, "observe", "abc", timeout=5)
        assert b.method(h, "predict", timeout=5) == {"n": 5.0}
        with pytest.raises(EntrantFailed, match="raised AttributeError: 'Counter' object has no attribute 'nope'"):
            b.method(h, "nope", timeout=5)
        assert b.method(h, "predict", timeout=5) == {"n": 5.0}  # a raise leaves the process as it was


def test_each_way_out_ends_the_call_with_its_reason_and_kills_what_it_started(how):
    token = f"1{os.getpid()}.{len(how)}"
    with box("outlive") as b:
        assert b.call(token, timeout=30) == "forked"
        deadline = time.monotonic() + 10
        while not sleepers(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sleepers(token)) == 1  # it runs while the sandbox does
    assert sleepers(token) == []
    cases = {
        "leave": (EntrantFailed, "raised SystemExit: 0"),
        "vanish": (EntrantFailed, "its process exited with code 0"),
        "hog": (EntrantFailed, "raised MemoryError"),
        "hang": (TimeLimit, "ran past the time limit of 1 s"),
        "crash": (EntrantFailed, "its process crashed \\(SIGSEGV\\)"),
        "garbage": (EntrantFailed, "returned what cannot be sent back: a object cannot be sent"),
    }
    for fn, (kind, why) in cases.items():
        with box(fn) as b, pytest.raises(kind, match=why):
            b.call(timeout=1)


def test_loading_is_checked_in_the_child_within_its_limit(how, tmp_path):
    bad = {
        "leaves.py": ("import sys\nsys.exit(0)\n", "loading leaves.py raised SystemExit: 0 \\(line 2\\)"),
        "vanishes.py": ("import os\nos._exit(0)\n", "loading vanishes.py: its process exited with code 0"),
        "loops.py": ("while True:\n    pass\n", "loading loops.py took more than 1 s \\(stopped\\)"),
    }
    for name, (text, why) in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ConfigError, match=f"^method.path={tmp_path / name}:solve: {why}$"):
            Sandbox(f"{tmp_path / name}:solve", limits=Limits(load_s=1)).open()
    with pytest.raises(ConfigError, match="has no function 'peak' \\(did you mean peek\\?\\)"):
        box("peak")
    with pytest.raises(ConfigError, match=r"hang\(\) cannot be called as hang\(x, y\): too many positional"):
        box("hang", signature=("x", "y"))
    mod = Sandbox("sweep.challenge.references:fourier", signature=("x", "y", "n_bits", "k_sparse")).open()
    assert "def fourier" in mod.source
    mod.close()


def test_the_wire_is_json_and_npy_never_pickle():
    a = np.arange(6).reshape(2, 3)
    back = decode(encode({"a": a, "b": [1, 2.5, "c", None, float("inf")]}))
    assert np.array_equal(back["a"], a) and back["b"] == [1, 2.5, "c", None, float("inf")]
    with pytest.raises(ValueError, match="Python objects"):
        encode(np.array([object()]))

    with pytest.raises(WireError, match="not a message"):
        decode([pickle.dumps({"value": 1})])  # a pickle is refused, not run
    evil = encode(np.array([1]))
    evil[1] = pickle.dumps(os.system)  # where an array should be
    with pytest.raises(WireError):
        decode(evil)
