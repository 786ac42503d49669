"""The character challenge's score: a model read as a stream, the group's way (cybertronai/wikitext, `evaluate`).

One `reset()`, then for each character of the text: `predict()` (the distribution of the next character, given
every character observed so far), then `observe(char)` (the true character). The model cannot see position i
before it has predicted it. Greedy-argmax accuracy: the share of characters that are the prediction's most
probable key (ties: the first such key in the dictionary's order). Bits per character: the mean of
-log2 p(true character) over the characters given a probability above zero; a character given none is counted
(`unpredicted`) and the figure flagged, not made infinite.

A prediction must be a distribution: a mapping of one-character strings to finite numbers >= 0 whose sum is
above 0 and at most 1 + SUM_TOL (a model may leave out characters it gives nothing). Anything else raises
NotADistribution with the position and what was wrong, and the run fails with that reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

SUM_TOL = 1e-3  # float32 softmaxes sum to 1 within ~1e-6; a model may leave characters out (sum below 1)


class Streaming(Protocol):
    """The group's CharModel: what the scorer calls (a handle on a model in another process, or the model)."""

    def reset(self) -> None: ...

    def predict(self) -> Any: ...

    def observe(self, char: str) -> None: ...


class NotADistribution(ValueError):
    """A predict() that returned something other than a distribution over characters."""


@dataclass
class StreamScore:
    chars: int  # characters scored
    right: int  # of them, the prediction's argmax
    bits: float  # -log2 p(true) summed over the characters given a probability
    unpredicted: int  # characters given no probability (left out of `bits`)
    seconds: float  # the stream's wall-clock (evaluation: not training, not charged energy)

    @property
    def accuracy(self) -> float:
        return self.right / self.chars if self.chars else math.nan

    @property
    def bits_per_char(self) -> float:
        scored = self.chars - self.unpredicted
        return self.bits / scored if scored else math.nan


def checked(p: Any, position: int) -> Mapping:
    """`p` if it is a distribution over characters (the module's docstring), else NotADistribution."""
    where = f"predict() before character {position}"
    if not isinstance(p, Mapping) or not p:
        raise NotADistribution(f"{where} returned {_short(p)}: expected a non-empty dict of character -> probability")
    total = 0.0
    for k, v in p.items():
        if not isinstance(k, str) or len(k) != 1:
            raise NotADistribution(f"{where} has the key {_short(k)}: expected one-character strings")
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise NotADistribution(f"{where} gives {k!r} the value {_short(v)}: expected a number") from None
        if not math.isfinite(f) or f < 0:
            raise NotADistribution(f"{where} gives {k!r} the probability {f}: expected a finite number >= 0")
        total += f
    if not 0 < total <= 1 + SUM_TOL:
        raise NotADistribution(f"{where} sums to {total:.6g}: expected a sum above 0 and at most 1")
    return p


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def score(model: Streaming, text: str) -> StreamScore:
    """Stream `text` through `model` (one reset, then predict/observe per character) and score it."""
    t0 = time.perf_counter()
    model.reset()
    right, bits, unpredicted = 0, 0.0, 0
    for i, ch in enumerate(text):
        p = checked(model.predict(), i)
        right += max(p, key=p.__getitem__) == ch
        q = float(p.get(ch, 0.0))
        if q > 0:
            bits -= math.log2(q)
        else:
            unpredicted += 1
        model.observe(ch)
    return StreamScore(len(text), int(right), bits, unpredicted, time.perf_counter() - t0)
