"""The character challenge's streaming cost per character at two prefix lengths (must be about constant): the
references' streams (sweep.methods.lm.streaming: the gpt's key/value cache, the MLP's window; the numpy n-gram)
read one character at a time, in this process, timed over a window of characters early in a long stream and
again deep into it. Beside the gpt's, what recomputing its whole window for every character would cost.

    python benchmarks/bench_char_stream.py [--early 1000] [--late 20000] [--window 1000] [--block 256]

Prints, per model, microseconds per character at each prefix length (medians over `--repeats` streams) and their
ratio (late / early), formed within each stream (both windows of one stream are one pair) and printed as the median
of the streams' ratios with their range; the models are untrained (the cost of a step does not depend on the
weights), float32, one thread.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from paired import ratios, spread

from sweep.challenge.ngram import NGram
from sweep.methods.lm.gpt_model import GPTModel
from sweep.methods.lm.mlp_model import MLPModel
from sweep.methods.lm.streaming import GPTStream, MLPStream
from sweep.problems.chars import challenge_text


class WholeWindow:
    """The gpt without its cache: every prediction runs the model over the last block_size characters."""

    def __init__(self, model: GPTModel, vocab: str) -> None:
        self.model, self.vocab, self.ids = model.eval(), vocab, [0]
        self.index = {c: i for i, c in enumerate(vocab)}

    def reset(self) -> None:
        self.ids = [0]

    @torch.no_grad()
    def predict(self) -> dict[str, float]:
        logits = self.model(torch.tensor([self.ids[-self.model.block_size :]]))[0, -1, : len(self.vocab)]
        return dict(zip(self.vocab, torch.softmax(logits, -1).tolist()))

    def observe(self, char: str) -> None:
        self.ids.append(self.index.get(char, len(self.vocab)))


def per_char_us(model, text: str, early: int, late: int, window: int) -> tuple[float, float]:
    """Microseconds per predict/observe step over `window` characters from `early` and from `late` (every character
    observed; predicted only in the two windows, where it is timed: a cached model's work is in observe anyway)."""
    model.reset()
    marks = {}
    for i, ch in enumerate(text[: late + window]):
        if i in (early, late):
            marks[i] = time.perf_counter()
        if i in (early + window, late + window - 1):
            marks[-i] = time.perf_counter()
        if early <= i < early + window or late <= i < late + window:  # the stream's other predictions: unread
            model.predict()
        model.observe(ch)
    return (
        (marks[-(early + window)] - marks[early]) / window * 1e6,
        (marks[-(late + window - 1)] - marks[late]) / (window - 1) * 1e6,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--early", type=int, default=1000)
    ap.add_argument("--late", type=int, default=20000)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--block", type=int, default=256, help="the gpt's positions (the reference has 64)")
    ap.add_argument("--repeats", type=int, default=3, help="streams a model (medians; a shared machine)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    train, text = challenge_text(None, 0.1, "train"), challenge_text(None, 0.1, "valid")
    vocab = "".join(sorted(set(train)))
    gpt = GPTModel(len(vocab) + 1, a.block, 2, 4, 48, 0.0)  # the gpt reference's sizes but its block
    models = {
        "ngram (order 5)": NGram(train[:200_000], 5),
        "mlp_lm (window)": MLPStream(MLPModel(len(vocab) + 1, 8, 24, 256), vocab),
        "gpt (kv cache)": GPTStream(gpt, vocab),
        "gpt (whole window)": WholeWindow(gpt, vocab),
    }
    print(
        f"us per character at prefix {a.early:,} and {a.late:,} ({a.window:,} characters each, medians of "
        f"{a.repeats} streams; late / early within each stream)"
    )
    for name, model in models.items():
        early, late = zip(*(per_char_us(model, text, a.early, a.late, a.window) for _ in range(a.repeats)))
        r = ratios(late, early)
        print(f"{name:20s} {statistics.median(early):9.1f} {statistics.median(late):9.1f}   ratio {spread(r)}")


if __name__ == "__main__":
    main()
