"""A job's footprint as its option classes declare it, each formula on the class that owns the sizes: a problem's
and a method's classmethod `footprint(cfg)` lists the big arrays a job holds (bytes), a method's `least_work(cfg)`
the operations no run of it can skip (one epoch, one training step, the search a random secret costs on average),
and where a run may stop early, its `most_work(cfg)` the operations of a run that never does (every epoch).
`sweep.config.memory` checks them, the one estimate every job passes before it starts.

Kept apart from memory.py: the option classes import this module, and the config schema imports them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class Term:
    """One part of a job's footprint: `amount` bytes (a footprint) or operations (least work), and the config
    fields it grows with (what a refusal names to lower)."""

    what: str
    amount: float
    fields: tuple[str, ...]


# operations a second, above what the device reaches: a CPU's cores on matrix products (the gpt's 20,092 tokens/s
# on 2 cores, docs/chars.md, at ~7e5 operations a token: ~1.4e10), a data-centre GPU's float32
OPS_PER_S = {"cpu": 5e10, "cuda": 5e13}
# the least time of one Python-level step of an MLP's loop (a training step, or one tile's forward, backward and
# update under a tiled variant), whatever its size: 19 us a step (standard, hidden=2, batch 1) and 13 us a tile
# (tiled, tile_size=1, hidden=200) in CPU time (2026-11-28, 2-core x86_64, `/usr/bin/time .venv/bin/sweep
# method.batch_size=1 method.lr=1e-9 problem.n_bits=3 problem.k_sparse=2 problem.n_train=2000 tracker=none ...` at
# 1 and 6 epochs); a bound well below both, so that what it refuses surely overruns
STEP_S = 5e-6


def device_kind(cfg: Any) -> str:
    """The key of OPS_PER_S the job's device.torch_device runs at."""
    return "cuda" if str(cfg.select("device.torch_device", "cpu")).startswith("cuda") else "cpu"


def item_bytes(cfg: Any) -> int:
    """Bytes of one float of the job's arrays (device.dtype)."""
    return 4 if "32" in str(cfg.select("device.dtype", "float64")) else 8


# a traced step's buffer reads/writes (a few dozen in every variant), each kept as a small tuple in a list
# the weight copies a run keeps for evaluating its curves after the clock (sweep.methods.epoch_log); past it, the
# curves are evaluated inline
SNAPSHOT_BUDGET_FLOATS = 20_000_000
EVENTS_PER_STEP = 40
EVENT_BYTES = 64


def mlp(cfg: Any) -> list[Term]:
    """The arrays of an MLP method (sgd and its subclasses, forward_forward) of `method.hidden` units and
    `method.layers` layers: weights (W1 and the hidden-to-hidden matrices, with the gradient, the initial and a
    working copy), the hidden layer over the whole train set (before and after the ReLU, as accuracy computes
    it), one weight copy per epoch for the curves (bounded by SNAPSHOT_BUDGET_FLOATS), and with
    `tracker.scope=all_steps` every step's trace events."""
    g = cfg.select
    n_bits, n_train, n_test = int(g("problem.n_bits", 0)), int(g("problem.n_train", 0)), int(g("problem.n_test", 0))
    hidden, layers, item = int(g("method.hidden", 0)), int(g("method.layers", 1) or 1), item_bytes(cfg)
    per_copy = hidden * n_bits + (layers - 1) * hidden * hidden
    epochs = int(g("method.max_epochs", 1) or 1)
    terms = [
        Term(
            "weights",
            4 * item * per_copy,
            ("method.hidden", "problem.n_bits") + (("method.layers",) if layers > 1 else ()),
        ),
        Term(
            "activations",
            2 * item * max(n_train, n_test) * hidden,
            ("problem.n_train", "problem.n_test", "method.hidden"),
        ),
        Term("snapshots", 8 * min(SNAPSHOT_BUDGET_FLOATS, epochs * per_copy), ("method.max_epochs", "method.hidden")),
    ]
    if g("tracker._target_") and g("tracker.scope") == "all_steps":
        steps = epochs * math.ceil(n_train / max(int(g("method.batch_size", 1) or 1), 1))
        fields = ("tracker.scope", "method.max_epochs", "problem.n_train", "method.batch_size")
        terms.append(Term("trace", steps * EVENTS_PER_STEP * EVENT_BYTES, fields))
    return terms


def mlp_epoch(cfg: Any) -> list[Term]:
    """The least work of an MLP method: one epoch (forward and backward over every training row: ~6 operations a
    weight a row), one evaluation of the train and test sets, and the epoch's Python-level steps at STEP_S each (as
    the operations the device does meanwhile): a training step a batch, a tile's a step under a tiled variant
    (`variant.tile_size=1 method.hidden=100000` is 100,000 steps of Python a batch, whatever its arithmetic)."""
    g = cfg.select
    n_bits, n_train, n_test = int(g("problem.n_bits", 0)), int(g("problem.n_train", 0)), int(g("problem.n_test", 0))
    hidden, layers = int(g("method.hidden", 0)), int(g("method.layers", 1) or 1)
    weights = hidden * n_bits + (layers - 1) * hidden * hidden
    fields = ("problem.n_train", "method.hidden", "problem.n_bits")
    batches = math.ceil(n_train / max(int(g("method.batch_size", 1) or 1), 1))
    tile = int(g("variant.tile_size", 0) or 0)  # (only the tiled variants take one)
    steps = batches * (math.ceil(hidden / tile) if tile > 0 else 1)
    step_fields = ("problem.n_train", "method.batch_size") + (("variant.tile_size", "method.hidden") if tile else ())
    return [
        Term("one epoch", 6 * weights * n_train, fields),
        Term("evaluation", 2 * weights * (n_train + n_test), fields + ("problem.n_test",)),
        Term(f"{steps:,} steps in Python", steps * STEP_S * OPS_PER_S[device_kind(cfg)], step_fields),
    ]


def mlp_epochs(cfg: Any) -> list[Term]:
    """The most work of an MLP method: `method.max_epochs` epochs, each with its evaluation, when the run never
    reaches its target (a curriculum's last stage alone, at the full width: a bound no run that misses exceeds
    less)."""
    epochs = int(cfg.select("method.max_epochs", 1) or 1)
    return [Term(f"{epochs:,} x {t.what}", epochs * t.amount, ("method.max_epochs", *t.fields)) for t in mlp_epoch(cfg)]
