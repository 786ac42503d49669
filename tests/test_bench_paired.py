"""benchmarks/paired.py, the benchmarks' A-vs-B measurement: every arm once a round, the order rotating, and each
ratio formed within its round (not a best-of-N of each side)."""

from __future__ import annotations

import importlib.util
import math

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("bench_paired", ROOT / "benchmarks" / "paired.py")
paired = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paired)


def test_rounds_rotate_the_order_and_pair_by_round() -> None:
    calls: list[str] = []

    def arm(name: str, values: list[float]):
        it = iter(values)
        return lambda: (calls.append(name), next(it))[1]

    got = paired.rounds({"a": arm("a", [2.0, 4.0, 9.0]), "b": arm("b", [1.0, 8.0, 3.0])}, 3)
    assert calls == ["a", "b", "b", "a", "a", "b"]  # two arms: which goes first alternates
    assert got == {"a": [2.0, 4.0, 9.0], "b": [1.0, 8.0, 3.0]}
    assert paired.ratios(got["a"], got["b"]) == [2.0, 0.5, 3.0]  # not min(a) / min(b) == 2.0

    calls.clear()
    paired.rounds({k: arm(k, [0.0] * 3) for k in "xyz"}, 3)
    assert calls == list("xyzyzxzxy")

    assert paired.paired(arm("p", [6.0, 6.0]), arm("q", [3.0, 2.0]), 2) == [2.0, 3.0]
    assert paired.ratios([1.0], [0.0]) == [math.inf]
    with pytest.raises(ValueError, match="unpaired"):
        paired.ratios([1.0, 2.0], [1.0])


def test_spread_prints_the_median_and_range() -> None:
    assert paired.spread([0.93, 1.2, 0.99]) == "median 0.99x (range 0.93-1.20 over 3 pairs)"
    assert paired.spread([8346.2, 5658.0, 9270.0], 0) == "median 8,346x (range 5,658-9,270 over 3 pairs)"
    assert paired.cell([2.0, 1.0, 4.0, 3.0]) == "2.50x (1.00-4.00)"
