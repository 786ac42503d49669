"""A benchmark that asks for a device this machine lacks (`--device cuda` without a GPU) ends in one line, exit 2,
not in NoDeviceHere's traceback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from sweep.errors import NoDeviceHere


def run(main: Callable[[], object]) -> None:
    try:
        main()
    except NoDeviceHere as e:
        print(f"{Path(sys.argv[0]).name}: {e}: run it on a machine that has one", file=sys.stderr)
        raise SystemExit(2) from None
