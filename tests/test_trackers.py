"""Trackers on small hand-computed traces, the vectorised ARD against the spec's literal rules, and the
trackers on real runs (all_steps curves; gf2 and km traces)."""

from __future__ import annotations

import random

import pytest

from sweep import job
from sweep.trace.trace import READ, Trace
from sweep.trackers.ard import ARDTracker, ard_report, reuse_distances
from sweep.trackers.cache import CacheTracker, cache_report
from sweep.trackers.dmd import DMDTracker
from tests.conftest import compose, random_trace


def literal_distances(trace: Trace) -> list[int]:
    """docs/traces.md "ARD", event by event."""
    last_write: dict[str, int] = {}
    out, clock = [], 0
    for op, name, size in trace:
        if op == READ:
            out.append(clock - last_write[name] if name in last_write else -1)
        else:
            last_write[name] = clock
            out.append(-1)
        clock += size
    return out


def test_ard_hand_computed():
    t = Trace.from_text("W a 4, W b 2, R a 4, R b 2, R a 4, R c 3")
    # clock 0: W a; 4: W b; 6: R a (6); 10: R b (6); 12: R a (12, from the write, not the last read); c cold
    assert reuse_distances(t).tolist() == [-1, -1, 6, 6, 12, -1]
    m = ard_report(t).metrics
    assert m["ard"] == pytest.approx((4 * 6 + 2 * 6 + 4 * 12) / 10)
    assert (m["reads"], m["writes"], m["total_floats"]) == (3, 2, 19)
    row = {r["buffer"]: r for r in ard_report(t).table}["a"]
    assert (row["reads"], row["writes"], row["min_dist"], row["avg_dist"], row["max_dist"]) == (2, 1, 6, 9.0, 12)


def test_write_then_read_back_is_its_size():
    assert reuse_distances(Trace.from_text("W a 7, R a 7")).tolist() == [-1, 7]


@pytest.mark.parametrize("seed", range(20))
def test_vectorised_ard_is_the_literal_rule(seed):
    rng = random.Random(seed)
    t = random_trace(rng, rng.randint(0, 60), names="abcdef")
    assert reuse_distances(t).tolist() == literal_distances(t)


def test_cache_hand_computed():
    t = Trace.from_text(
        "W a 4, W b 2, R a 4,"  # a hit (then most recent)
        "W c 3,"  # evicts b then a: the cache holds 6
        "R b 2, R a 4,"  # misses at distances 9 and 15; a's insert evicts c
        "R big 10, W big 10, R big 10,"  # larger than the cache: never resident, a cold miss and a miss at 10
        "R b 2,"  # hit
        "W a 5, R a 5"
    )  # a grows in place (no eviction check): hit
    m = cache_report(t, capacity=6).metrics
    assert (m["cache_hits"], m["cache_misses"]) == (3, 4)
    assert m["cache_hit_rate"] == pytest.approx(3 / 7)
    assert m["effective_ard"] == pytest.approx((2 * 9 + 4 * 15 + 10 * 10) / 16)  # the cold miss has no distance
    assert m["cache_miss_floats"] == 26


def test_big_cache_misses_only_cold_reads():
    t = Trace.from_text("W a 4, R a 4, R z 2, R a 4")
    m = cache_report(t, capacity=100).metrics
    assert (m["cache_hits"], m["cache_misses"], m["effective_ard"]) == (2, 1, 0.0)


def test_cache_and_dmd_trackers_report_ard_too():
    t = Trace.from_text("W a 4, W b 2, R a 4, R b 2")
    ard = ARDTracker().summarize(t).metrics
    for tracker, extra in ((CacheTracker(cache_size_floats=5), "cache_hit_rate"), (DMDTracker(), "dmd")):
        report = tracker.summarize(t)
        assert {k: report.metrics[k] for k in ard} == ard
        assert extra in report.metrics
        assert {r["buffer"] for r in report.table} == {"a", "b"}


def run(*overrides: str):
    return job.run(compose(*overrides))


def test_all_steps_gives_per_epoch_curves():
    r = run(
        "method.hidden=32",
        "problem.n_bits=10",
        "problem.n_train=200",
        "method.max_epochs=5",
        "method.target_accuracy=1.0",
        "tracker=cache",
        "tracker.scope=all_steps",
        "tracker.cache_size_floats=256",
    )
    epochs = int(r.metrics["epochs"])
    assert epochs == 5
    for key in ("ard", "reads", "total_floats", "cache_hit_rate", "effective_ard"):
        curve = r.curves[f"{key}_per_epoch"]
        assert len(curve) == epochs and all(v > 0 for v in curve)
    # the totals are the whole run's trace: every epoch's floats, and reads across epoch boundaries
    assert r.metrics["total_floats"] == sum(r.curves["total_floats_per_epoch"])
    assert r.metrics["reads"] >= sum(r.curves["reads_per_epoch"])
    # one step per batch of 32: 7 batches, each writing x and y and running a traced step of 40-odd events
    assert r.curves["writes_per_epoch"][1] >= 7 * 2


@pytest.mark.parametrize("method", ["gf2", "km"])
def test_gf2_and_km_traces_describe_the_algorithm(method):
    small, large = (run(f"method={method}", "tracker=dmd", f"problem.n_bits={n}").metrics for n in (12, 24))
    for m in (small, large):
        assert m["ard"] > 0 and m["reads"] >= 3 and m["dmd"] > 0
    # the figures grow with the problem: a function of the algorithm, not a constant
    assert large["total_floats"] > small["total_floats"] and large["dmd"] > small["dmd"]
    # a cache smaller than the working set (gf2 counts a row of 25 bits as one 64-bit word: its block of 50 rows
    # fits in 64 elements)
    tight = run(f"method={method}", "tracker=cache", "problem.n_bits=24", "tracker.cache_size_floats=16").metrics
    assert 0 < tight["cache_misses"] and tight["cache_hit_rate"] < 1


@pytest.mark.parametrize("tracker", [ARDTracker(), CacheTracker(cache_size_floats=8), DMDTracker()])
def test_summarize_each_is_each_summary(tracker):
    rng = random.Random(5)
    traces = [random_trace(rng, rng.randint(0, 30)) for _ in range(6)]
    batched = tracker.summarize_each(traces)
    for t, got in zip(traces, batched):
        assert got == pytest.approx(tracker.summarize(t).metrics)
