"""What a sweep keeps of each finished run for its whole length (`RunResult.recorded`): its metrics, with one
copy of each metric's name for all the runs, however many the sweep has."""

from __future__ import annotations

import pickle

from sweep.result import RunResult


def kept(seed: int) -> RunResult:
    """A run's result as the launching process gets it from a worker (unpickled), once recorded."""
    names = ["accuracy", "epochs", "test_loss", "train_loss", "wall_clock_s", "cost_usd"]
    result = RunResult(config={"problem": {"seed": seed}}, metrics={n: seed + 0.5 for n in names}, curves={"x": [1.0]})
    result = pickle.loads(pickle.dumps(result))
    result.recorded()
    return result


def test_recorded_runs_share_their_metric_names():
    a, b = kept(1), kept(2)
    assert all(ka is kb for ka, kb in zip(a.metrics, b.metrics))  # one name object, not one per run


def test_recorded_keeps_metrics_and_ids_and_drops_the_rest():
    r = kept(3)
    assert r.metrics == {n: 3.5 for n in ("accuracy", "epochs", "test_loss", "train_loss", "wall_clock_s", "cost_usd")}
    assert (r.config, r.curves, r.artifacts, r.tags) == ({}, {}, {}, {})
    assert r.status == "FINISHED"
