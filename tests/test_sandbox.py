"""sweep.sandbox: a user's code in a fresh process of its own, with bubblewrap and in the fallback
(SWEEP_SANDBOX=process): what it sees, how each way out of it ends (one line), that nothing it started outlives it,
and the handle API the character challenge uses."""

from __future__ import annotations

import os
import pickle
import socket
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from sweep.errors import ConfigError
from sweep.sandbox import EntrantFailed, Limits, Sandbox, TimeLimit, isolation
from sweep.sandbox.wire import WireError, decode, encode, receive

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
        "garbage": (EntrantFailed, "returned what cannot be sent back: a value of type object cannot be sent"),
    }
    for fn, (kind, why) in cases.items():
        with box(fn) as b, pytest.raises(kind, match=why):
            b.call(timeout=1)


def test_what_an_entrant_writes_is_bounded_in_all_and_gone_after(how):
    # under bwrap its temporary folder and working directory are one tmpfs of disk_mb: /tmp, a tmpfs of no size,
    # took host memory past memory_mb (1,280 MiB in a round) and the working directory, the host's, its disk; in
    # either, tempfile's folder is the working directory, removed with the sandbox
    with box("spill", limits=Limits(disk_mb=8)) as b:
        written = b.call(timeout=30)
        folder = b._dir
    assert list(written) == [str(folder / "work")], written  # its temporary folder is its working directory
    if how == "bwrap":
        assert 0 < written[str(folder / "work")] <= 8, written
    else:  # the fallback: a file per file_mb only (docs/challenge.md), in its folder, removed after
        assert written[str(folder / "work")] == 128, written
    assert folder is not None and not folder.exists()


def test_loading_is_checked_in_the_child_within_its_limit(how, tmp_path, monkeypatch):
    bad = {  # the loop's limit: short, but more than a start on a loaded machine takes (the others': the default)
        "leaves.py": (
            "import sys\nsys.exit(0)\n",
            "loading leaves.py raised SystemExit: 0 \\(leaves.py, line 2\\)",
            30,
        ),
        "vanishes.py": ("import os\nos._exit(0)\n", "loading vanishes.py: its process exited with code 0", 30),
        "loops.py": ("while True:\n    pass\n", "loading loops.py took more than 4 s \\(stopped\\)", 4),
    }
    for name, (text, why, load_s) in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ConfigError, match=f"^method.path={tmp_path / name}:solve: {why}$"):
            Sandbox(f"{tmp_path / name}:solve", limits=Limits(load_s=load_s)).open()
    with pytest.raises(ConfigError, match="has no function 'peak' \\(did you mean peek\\?\\)"):
        box("peak")
    with pytest.raises(ConfigError, match=r"hang\(\) cannot be called as hang\(x, y\): too many positional"):
        box("hang", signature=("x", "y"))
    mod = Sandbox("sweep.challenge.references:fourier", signature=("x", "y", "n_bits", "k_sparse")).open()
    assert "def fourier" in mod.source
    mod.close()
    # a user's package on the parent's path (found without running it here), seen in the child and nothing beside
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "__init__.py").write_text("raise RuntimeError('never run in the parent')\n")
    (tmp_path / "mine" / "model.py").write_text("import os\n\ndef files(d):\n    return sorted(os.listdir(d))\n")
    (tmp_path / "mlflow.db").write_text("beside it")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="importing mine.model raised RuntimeError: never run in the parent"):
        Sandbox("mine.model:files").open()
    (tmp_path / "mine" / "__init__.py").write_text("")
    with Sandbox("mine.model:files") as b:
        seen = b.call(str(tmp_path), timeout=30)
    assert seen == (["mine"] if how == "bwrap" else sorted(p.name for p in tmp_path.iterdir()))


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


def test_without_bwrap_the_fallback_runs_and_says_so_once(monkeypatch, tmp_path, capfd):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    monkeypatch.delenv(isolation.ISOLATION_ENV, raising=False)
    isolation.bwrap_missing.cache_clear()
    try:
        assert isolation.mode() == "process" and isolation.mode() == "process"
        err = capfd.readouterr().err.strip().splitlines()
        assert err == [
            "sweep: bwrap is not installed (Debian: apt-get install bubblewrap); entrants run as plain processes, "
            "without the filesystem's and the network's isolation (docs/challenge.md)"
        ]
        monkeypatch.setenv(isolation.ISOLATION_ENV, "chroot")
        with pytest.raises(ValueError, match="SWEEP_SANDBOX='chroot' is not allowed: expected one of bwrap, process"):
            isolation.mode()
    finally:
        isolation.bwrap_missing.cache_clear()


def test_the_parent_reads_no_message_larger_than_its_bounds():
    r, w = os.pipe()
    os.write(w, struct.pack(">II", 1, 300 << 20))  # one frame of 300 MiB announced
    with pytest.raises(WireError, match="a frame of 314572800 bytes: at most"):
        receive(r, time.monotonic() + 5)
    os.write(w, struct.pack(">I", 1))  # a message cut short: the deadline, not a hang
    with pytest.raises(WireError, match="no answer before the deadline"):
        receive(r, time.monotonic() + 0.2)
    os.close(w)
    with pytest.raises(WireError, match="the pipe closed"):
        receive(r, time.monotonic() + 5)
    os.close(r)
