"""DMD (element-level LRU stack distance) against a brute-force list simulation, element by element."""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest

from sweep.trace.trace import Trace
from sweep.trackers.dmd import DMDTracker, dmd, element_distances
from tests.conftest import random_trace


def brute_force(trace: Trace) -> list[int]:
    """The definition, literally: a list ordered by most recent write; reads observe 1-based depth."""
    stack: list[tuple[str, int]] = []
    out: list[int] = []
    for op, name, size in trace:
        for j in range(size):
            el = (name, j)
            if op == 0:  # read
                out.append(stack.index(el) + 1 if el in stack else len(stack) + 1)
            else:
                if el in stack:
                    stack.remove(el)
                stack.insert(0, el)
    return out


def test_hand_computed():
    # W a 2 -> stack a1 a0; W b 1 -> b0 a1 a0; R a 3: a0 depth 3, a1 depth 2, a2 never written: 3 + 1
    t = Trace.from_text("W a 2, W b 1, R a 3, W a 1, R a 2, R c 1")
    # W a 1 -> a0 b0 a1: R a 2 gives a0 1, a1 3; R c 1: 3 + 1
    assert element_distances(t).tolist() == [3, 2, 4, 1, 3, 4]
    assert dmd(t) == pytest.approx(sum(math.sqrt(d) for d in [3, 2, 4, 1, 3, 4]))


@pytest.mark.parametrize("seed", range(40))
def test_matches_brute_force_element_by_element(seed):
    rng = random.Random(seed)
    t = random_trace(rng, rng.randint(1, 40), sizes=(0, 1, 2, 3, 5, 8) if seed % 2 else (4, 4, 4, 7), p_read=0.55)
    expected = brute_force(t)
    assert element_distances(t).tolist() == expected
    assert dmd(t) == pytest.approx(sum(math.sqrt(d) for d in expected), rel=1e-12)


def test_standard_step_matches_brute_force():
    # a real variant's single-step trace at small sizes (n=4, H=6), through the tracker interface
    from sweep.variants.standard import Standard
    from tests.test_variants import traced_step

    t = traced_step(Standard(), n=4, hidden=6)
    expected = brute_force(t)
    assert element_distances(t).tolist() == expected
    report = DMDTracker().summarize(t)
    assert report.metrics["dmd"] == pytest.approx(sum(math.sqrt(d) for d in expected))
    assert "ard" in report.metrics


def test_large_trace_is_fast():
    # one standard step at H=1000 is ~1e5 element accesses; 200 of them must take well under a second
    from sweep.variants.standard import Standard
    from tests.test_variants import traced_step

    one = traced_step(Standard(), n=20, hidden=1000)
    t = Trace()
    for _ in range(200):
        t.extend(one)
    t0 = time.perf_counter()
    value = dmd(t)
    assert time.perf_counter() - t0 < 2.0
    assert value > 0 and np.isfinite(value)
