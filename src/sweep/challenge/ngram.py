"""A character n-gram with backoff, in numpy alone: the character challenge's simplest reference (method=char_model
method.path=sweep.challenge.ngram:train, the method's default). A module of its own, without torch: the harness
takes a module that imports torch for a torch model (sweep.challenge.harness).

Training counts, for every context length k = 0 .. order - 1, how often each character follows each context of k
characters (one np.unique over the context-and-next keys of the whole text). The prediction after a history
interpolates from the shortest context up: p_k = (counts_k + kappa * p_(k-1)) / (n_k + kappa), p_(-1) uniform
over the vocabulary, a context never seen leaving p as it is (it backs off to the shorter one). A step looks up
`order` contexts (binary searches) and mixes vectors of the vocabulary's size: its cost does not grow with the
prefix.
"""

from __future__ import annotations

import numpy as np

ORDER = 5
MAX_CHARS = 10_000_000  # of the training text, from its start (WikiText-103's 540 M would not fit a quick round)


class NGram:
    def __init__(self, text: str, order: int = 5, kappa: float = 2.0) -> None:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        points, ids = np.unique(codes, return_inverse=True)
        self.vocab = "".join(map(chr, points.tolist()))
        self.index = {c: i for i, c in enumerate(self.vocab)}
        v = len(self.vocab)
        self.base = v + 1  # id v: a character the training text lacks (no context with it was seen)
        # a context's key is its ids in base `base`: the longest must fit an int64 with its next character
        self.order = max(1, min(order, int(62 / np.log2(self.base))))
        self.kappa = kappa
        ids = ids.astype(np.int64)
        self.tables = []  # per context length: (sorted context keys, their first row, next ids, counts)
        for k in range(self.order):
            ctx = np.zeros(len(ids) - k, dtype=np.int64)
            for j in range(1, k + 1):  # the j-th character back, most recent lowest
                ctx += ids[k - j : len(ids) - j] * self.base ** (j - 1)
            keys, counts = np.unique(ctx * self.base + ids[k:], return_counts=True)
            contexts, first = np.unique(keys // self.base, return_index=True)
            self.tables.append((contexts, np.append(first, len(keys)), keys % self.base, counts.astype(np.float64)))
        self.reset()

    def reset(self) -> None:
        self.history: list[int] = []  # the last order - 1 ids, most recent last

    def observe(self, char: str) -> None:
        self.history.append(self.index.get(char, self.base - 1))
        del self.history[: -(self.order - 1) or len(self.history)]

    def predict(self) -> dict[str, float]:
        v = len(self.vocab)
        p = np.full(v, 1.0 / v)
        ctx = 0
        for k, (contexts, first, nxt, counts) in enumerate(self.tables):
            if k > len(self.history):
                break
            if k:
                ctx += self.history[-k] * self.base ** (k - 1)
            i = np.searchsorted(contexts, ctx)
            if i == len(contexts) or contexts[i] != ctx:
                continue  # never seen: the shorter context's p stands
            rows = slice(first[i], first[i + 1])
            c = np.zeros(v)
            c[nxt[rows]] = counts[rows]
            p = (c + self.kappa * p) / (counts[rows].sum() + self.kappa)
        return dict(zip(self.vocab, p.tolist()))


def train(train_text: str, valid_text: str | None = None) -> NGram:
    """Counts of every context of up to ORDER - 1 characters in the first MAX_CHARS of the training text (the
    validation text is not used)."""
    return NGram(train_text[:MAX_CHARS], ORDER)
