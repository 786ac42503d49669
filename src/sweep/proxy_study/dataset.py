"""The study's dataset, kept in the repository: one CSV file per machine and day (docs/results/proxy_study/
<gpu-model>-<date>.csv for a GPU's slices, cachegrind-<date>.csv for the CPU's ground truth), one row per run.
A row is written as soon as its run ends, so a slice cut short keeps what it measured; the file is replaced whole
(written beside, then renamed), so a reader never sees half a row."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from typing import Iterable

from sweep.paths import PROJECT_ROOT

DATASET_DIR = PROJECT_ROOT / "docs" / "results" / "proxy_study"


def slug(text: str) -> str:
    """A file name's part from a device's name: 'NVIDIA H200' -> 'nvidia-h200'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def read(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def read_all(directory: Path, pattern: str = "*.csv") -> list[dict[str, str]]:
    """Every row of every file in `directory` matching `pattern`, each with its file's name under `file`."""
    rows = []
    for p in sorted(directory.glob(pattern)):
        rows += [{**r, "file": p.name} for r in read(p)]
    return rows


def append(path: Path, row: dict[str, object]) -> None:
    """Add `row` to the file at `path` (columns: the union of the file's and the row's, in order of first use)."""
    rows: list[dict[str, object]] = [*read(path), row]
    columns = list(dict.fromkeys(k for r in rows for k in r))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, columns, restval="")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def column(rows: Iterable[dict[str, str]], key: str) -> list[float]:
    return [number(r.get(key)) for r in rows]
