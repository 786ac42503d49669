"""Paired A-vs-B measurement for the benchmarks: each round measures every arm once, back to back, and a ratio is
formed within a round. A best-of-N of each side pairs a lucky A of one moment with a lucky B of another; on a
shared machine that is noise, not speed (a best-of-N ratio once called `sweep` 1.06x "faster than a plain loop"
that an independent loop put at 0.93-0.99x). The figure to print is the median of the paired ratios with their
range.
"""

from __future__ import annotations

import math
import statistics
from typing import Callable, Mapping, Sequence, TypeVar

T = TypeVar("T")


def rounds(arms: Mapping[str, Callable[[], T]], repeats: int) -> dict[str, list[T]]:
    """Each arm's measurements over `repeats` rounds; index i of every list is round i's. Within a round the arms
    run back to back, in an order that rotates by one each round (two arms: which goes first alternates), so a
    machine growing busier or quieter favours none."""
    names = list(arms)
    out: dict[str, list[T]] = {name: [] for name in names}
    for i in range(repeats):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            out[name].append(arms[name]())
    return out


def ratios(num: Sequence[float], den: Sequence[float]) -> list[float]:
    """num[i] / den[i], round by round (a zero denominator: inf)."""
    if len(num) != len(den):
        raise ValueError(f"unpaired: {len(num)} measurements against {len(den)}")
    return [a / b if b else math.inf for a, b in zip(num, den)]


def paired(a: Callable[[], float], b: Callable[[], float], repeats: int) -> list[float]:
    """a's measurement over b's, one ratio a round, a and b taking turns to go first."""
    got = rounds({"a": a, "b": b}, repeats)
    return ratios(got["a"], got["b"])


def spread(values: Sequence[float], digits: int = 2) -> str:
    """'median 1.23x (range 1.10-1.31 over 5 pairs)'."""
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"median {mid:,.{digits}f}x (range {lo:,.{digits}f}-{hi:,.{digits}f} over {len(values)} pairs)"


def cell(values: Sequence[float], digits: int = 2) -> str:
    """The median and range for a table's cell, '1.23x (1.10-1.31)' (the table's heading names the pairs)."""
    lo, mid, hi = min(values), statistics.median(values), max(values)
    return f"{mid:,.{digits}f}x ({lo:,.{digits}f}-{hi:,.{digits}f})"
