"""method=bigram: the next character from the current one by counts over the training text; exact, the floor
every learned model must beat. Its prediction is the most frequent successor; its bits per character use the
counts smoothed by adding `smoothing` to each (an unseen pair would otherwise cost infinitely many bits).

Counting is one pass of numpy over the host's text whatever the device (it is not a torch workload)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from sweep.config.fields import Rule, positive_finite
from sweep.methods.base import SEEDS_ONLY, Context, MethodBase, Outcome
from sweep.problems.chars import Corpus
from sweep.trace.source import Source


@dataclass
class Bigram(MethodBase):
    problems: ClassVar[tuple[str, ...]] = ("chars",)
    vectorised: ClassVar[tuple[str, ...]] = SEEDS_ONLY  # exact: a seed changes nothing, its runs share a task
    trace_source: ClassVar[str] = Source.AUTO.value  # tracker.source's default, as the other exact methods'
    field_rules: ClassVar[tuple[Rule, ...]] = (Rule("method.smoothing", "a finite number > 0", positive_finite),)

    name: str = "bigram"
    smoothing: float = 1.0  # add-one (Laplace) for the bits per character

    def solve(self, ctx: Context) -> Outcome:
        d: Corpus = ctx.data
        v = d.vocab_size
        with ctx.recording(loaded={"text": d.train.astype(np.int64)}, backend="numpy") as r:
            trace, text = r.trace, r["text"]
            trace.write("text", len(text))  # the training text loaded; each character read once and counted
            trace.read("text", len(text))
            counts = np.bincount(text[:-1] * v + text[1:], minlength=v * v).reshape(v, v)
            trace.compute("add", len(text) - 1)
            trace.write("counts", v * v)
            counts = r.unwrap(counts)
        ctx.trace.end_step()
        best = counts.argmax(axis=1)

        def evaluate(o: Outcome) -> None:
            o.accuracy, o.extra["bits_per_char"] = scores(counts, best, self.smoothing, *d.val_blocks())
            o.train_accuracy = scores(counts, best, self.smoothing, *d.train_blocks())[0]

        return Outcome(
            epochs=1,
            steps=1,
            extra={"steps": 1, "tokens": len(text) - 1, **d.sizes()},
            evaluate=evaluate,
        )


def scores(counts: np.ndarray, best: np.ndarray, alpha: float, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(accuracy, bits per character) of the bigram's predictions of y from the characters x just before them."""
    prev, nxt = x.ravel(), y.ravel()
    p = (counts[prev, nxt] + alpha) / (counts.sum(axis=1)[prev] + alpha * counts.shape[1])
    return float(np.mean(best[prev] == nxt)), float(-np.mean(np.log2(p))) if len(p) else math.nan
