"""cloudpickle that keeps the file name of code it pickles by value.

cloudpickle 3.1.3 renames the code of every function it pickles by value (a task defined in a script, a
class of `__main__`) to `<dynamic-code>`, to make payloads byte-identical wherever they are made. A failed
job's traceback from a worker then loses the user's file and line. Here code objects travel through
`marshal`, the format of a `.pyc`, which keeps every field of the code as compiled, file name and line table
included; cloudpickle still decides what goes by value and what by reference. The bytes load with plain
`pickle.loads` on the same Python version, which cloudpickle's own code objects require too.
"""

from __future__ import annotations

import io
import marshal
import pickle
import types
from collections import ChainMap
from typing import Any

import cloudpickle


def _reduce_code(code: types.CodeType) -> tuple[Any, tuple[bytes]]:
    return marshal.loads, (marshal.dumps(code),)


class _Pickler(cloudpickle.Pickler):
    dispatch_table = ChainMap({types.CodeType: _reduce_code}, cloudpickle.Pickler.dispatch_table)


def dumps(obj: Any) -> bytes:
    """`cloudpickle.dumps(obj)`, with code objects kept whole (see the module's docstring)."""
    with io.BytesIO() as buf:
        _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        return buf.getvalue()
