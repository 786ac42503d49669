"""The messages between the parent and the sandboxed child: length-prefixed frames over a pipe, a JSON header and
numpy arrays as ``.npy`` frames, read back with ``np.load(allow_pickle=False)``.

Never pickle: unpickling bytes runs the code they name, and the child is untrusted. A value is JSON (None, bools,
numbers, strings, lists, dicts with string keys) in which an array is ``{"$array": i}`` (the i-th array frame)
and an object kept in the child is ``{"$handle": i}``. Anything else is refused where it is encoded (a dtype
of Python objects among them: ``np.save`` would pickle it). A frame is at most MAX_FRAME bytes, a message at most
MAX_MESSAGE bytes in MAX_ARRAYS arrays, so a child cannot make the parent read without end.
"""

from __future__ import annotations

import io
import json
import math
import os
import select
import struct
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_FRAME = 256 << 20
MAX_MESSAGE = 512 << 20  # all its frames together, as the parent reads the child's
# what the child reads from the parent, which it trusts: a whole training text (WikiText-103's train split is
# ~539 MB, sent in PIECE-sized frames by sweep.methods.char_entrant)
REQUEST_MESSAGE = 4 << 30
MAX_ARRAYS = 64
_LEN = struct.Struct(">I")


class WireError(Exception):
    """A message that is not one (garbage, too large, cut short) or a pipe closed: the message says which."""


class Closed(WireError):
    """The other end closed the pipe (the child exited or was killed)."""


class TimedOut(WireError):
    """No whole message before the deadline."""


@dataclass(frozen=True)
class Handle:
    """An object kept in the child (Sandbox.call(keep=True)): only its number travels."""

    id: int


def encode(value: Any) -> list[bytes]:
    """``value`` as frames: the JSON header, then the arrays it holds (ValueError: it holds something else)."""
    arrays: list[bytes] = []

    def plain(v: Any) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if isinstance(v, float) and not math.isfinite(v):
                return {"$float": repr(v)}
            return v
        if isinstance(v, Handle):
            return {"$handle": v.id}
        if isinstance(v, np.generic):
            return plain(v.item())
        if isinstance(v, np.ndarray):
            if v.dtype.hasobject:
                raise ValueError(f"an array of dtype {v.dtype} (Python objects) cannot be sent")
            buf = io.BytesIO()
            np.save(buf, np.asarray(v), allow_pickle=False)
            arrays.append(buf.getvalue())
            return {"$array": len(arrays) - 1}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                raise ValueError("a dict with keys that are not strings cannot be sent")
            return {k: plain(x) for k, x in v.items()}
        raise ValueError(f"a value of type {type(v).__name__} cannot be sent (JSON data and numpy arrays only)")

    header = json.dumps({"value": plain(value), "arrays": len(arrays)}, allow_nan=False).encode()
    if len(arrays) > MAX_ARRAYS:
        raise ValueError(f"{len(arrays)} arrays in one message: at most {MAX_ARRAYS}")
    return [header, *arrays]


def decode(frames: list[bytes]) -> Any:
    """The value of ``frames`` (WireError: not a message this module makes)."""
    try:
        doc = json.loads(frames[0])
        arrays = [np.load(io.BytesIO(f), allow_pickle=False) for f in frames[1:]]
    except Exception as e:  # noqa: BLE001 - whatever the bytes are, they are not a message: one line
        raise WireError(f"not a message ({type(e).__name__}: {str(e)[:200]})") from None

    def value(v: Any) -> Any:
        if isinstance(v, list):
            return [value(x) for x in v]
        if isinstance(v, dict):
            if len(v) == 1 and "$array" in v:
                return arrays[_index(v["$array"], len(arrays))]
            if len(v) == 1 and "$handle" in v:
                return Handle(_index(v["$handle"], 1 << 30))
            if len(v) == 1 and "$float" in v and v["$float"] in ("nan", "inf", "-inf"):
                return float(v["$float"])
            return {k: value(x) for k, x in v.items()}
        return v

    if not isinstance(doc, dict) or "value" not in doc or doc.get("arrays") != len(arrays):
        raise WireError("not a message (its header does not say its arrays)")
    try:
        return value(doc["value"])
    except RecursionError:
        raise WireError("not a message (nested too deep)") from None


def _index(i: Any, n: int) -> int:
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
        raise WireError(f"not a message (reference {i!r} out of range)")
    return i


def send(fd: int, value: Any) -> None:
    """Write ``value``'s frames to ``fd``: a count, then each frame (ValueError: it cannot be sent)."""
    frames = encode(value)
    _write_all(fd, _LEN.pack(len(frames)))
    for f in frames:
        if len(f) > MAX_FRAME:
            raise ValueError(f"a frame of {len(f)} bytes: at most {MAX_FRAME}")
        _write_all(fd, _LEN.pack(len(f)) + f)


def receive(fd: int, deadline: float | None = None, most: int = MAX_MESSAGE) -> Any:
    """The next value read from ``fd`` (Closed, TimedOut, WireError); ``deadline``: time.monotonic() by which it
    must be whole; ``most``: the bytes its frames may hold together."""
    count = _LEN.unpack(_read(fd, 4, deadline))[0]
    if not 1 <= count <= MAX_ARRAYS + 1:
        raise WireError(f"not a message ({count} frames)")
    frames, total = [], 0
    for _ in range(count):
        n = _LEN.unpack(_read(fd, 4, deadline))[0]
        total += n
        if n > MAX_FRAME or total > most:
            raise WireError(f"not a message (a frame of {n} bytes: at most {MAX_FRAME}, {most} in all)")
        frames.append(_read(fd, n, deadline))
    return decode(frames)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimedOut("no answer before the deadline")
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise Closed("the pipe closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
