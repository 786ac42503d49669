"""Replaying recorded steps (StepTemplates) gives exactly the trace of recording every step: the same events
in the same order, the same operation counts, so every tracker's figures are the same, for every method and
variant whose loop replays, with a smaller last batch and with steps where no margin was active."""

from __future__ import annotations

import pytest

from sweep.methods.step_templates import StepTemplates
from tests.test_trace_templates import TRACKERS, assert_same, solve_traced

# n_train=50 in batches of 4 leaves a last batch of 2; over 10 epochs at lr=0.5 some batches of either size have
# no active margin (the step's other branch); target 1.01 is never reached, so every epoch runs
SMALL = (
    "method.hidden=16",
    "problem.n_bits=6",
    "problem.n_train=50",
    "method.batch_size=4",
    "method.max_epochs=10",
    "method.lr=0.5",
    "method.target_accuracy=1.01",
)


# (overrides, distinct segments at least): the init writes, then (2 batch sizes) x (active margin or none) steps,
# so both branches are replayed; sign_sgd's steps keep some margin active here, so only the two sizes
@pytest.mark.parametrize(
    "overrides, segments",
    [
        (("variant=standard",), 5),
        (("variant=fused",), 5),
        (("variant=perlayer",), 5),
        (("variant=tiled", "variant.tile_size=4"), 5),
        (("variant=tiled_fused", "variant.tile_size=4"), 5),
        (("variant=tiled_w2", "variant.tile_size=4"), 5),
        (("method=sign_sgd",), 3),
        (("method=curriculum",), 5),
    ],
    ids=["standard", "fused", "perlayer", "tiled", "tiled_fused", "tiled_w2", "sign_sgd", "curriculum"],
)
def test_replayed_steps_equal_recorded_steps(overrides, segments, monkeypatch):
    trace, epochs = solve_traced(*SMALL, *overrides)
    monkeypatch.setattr(StepTemplates, "replay", False)
    ref, ref_epochs = solve_traced(*SMALL, *overrides)
    assert len(trace.templates) >= segments
    assert trace.events == ref.events and trace.compute_ops == ref.compute_ops
    assert [e.events for e in epochs] == [e.events for e in ref_epochs]
    assert [e.compute_ops for e in epochs] == [e.compute_ops for e in ref_epochs]
    for tracker in TRACKERS:
        assert_same(tracker.summarize(trace), tracker.summarize(ref))
        assert tracker.summarize_each(epochs) == [
            pytest.approx(m, rel=1e-12) for m in tracker.summarize_each(ref_epochs)
        ]
