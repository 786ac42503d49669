"""The character challenge (method=char_model, sweeps=char_challenge, `sweep-compare char_challenge`): the streaming
score against an independent count, the references' streams against their models' whole forward pass, the
scorer's refusals, and end to end: a user's file as a single run and in a round ranked with a reference, each
broken entrant with its documented outcome."""

from __future__ import annotations

import csv
import math
from collections import Counter

import pytest
import torch
from mlflow.tracking import MlflowClient

from sweep.challenge.ngram import ORDER, NGram
from sweep.methods.char_stream import NotADistribution, checked, score
from sweep.problems.chars import challenge_text
from tests import forked_sweep
from tests.conftest import run_sweep

NOT_DIST, NO_STREAM, MEMORISE = (
    f"examples/char_models/{n}.py:train" for n in ("not_a_distribution", "no_stream", "memorise_valid")
)
NGRAM = "sweep.challenge.ngram:train"
# a user's model: the most frequent next character after the current one, counted by numpy
USER = """
import numpy as np


class Model:
    def __init__(self, probs, unigram, vocab):
        self.probs, self.unigram, self.vocab = probs, unigram, vocab
        self.index = {c: i for i, c in enumerate(vocab)}

    def reset(self):
        self.last = None

    def predict(self):
        i = self.index.get(self.last)
        row = self.probs[i] if i is not None and self.probs[i].sum() > 0 else self.unigram
        return dict(zip(self.vocab, row.tolist()))

    def observe(self, char):
        self.last = char


def train(train_text, valid_text=None):
    vocab = sorted(set(train_text))
    index = {c: i for i, c in enumerate(vocab)}
    ids = np.array([index[c] for c in train_text])
    counts = np.zeros((len(vocab), len(vocab)))
    np.add.at(counts, (ids[:-1], ids[1:]), 1)
    probs = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    return Model(probs, np.bincount(ids, minlength=len(vocab)) / len(ids), vocab)
"""


def independent_accuracy(train: str, text: str, order: int = ORDER, kappa: float = 2.0) -> float:
    """Greedy-argmax accuracy of an interpolated n-gram on `text`, counted in pure Python, apart from the project's
    scorer and its numpy n-gram: contexts counted by collections.Counter, the argmax the first highest in
    code-point order."""
    vocab = sorted(set(train))
    counts = [Counter() for _ in range(order)]  # (context, next) -> n
    totals = [Counter() for _ in range(order)]
    for k in range(order):
        for i in range(k, len(train)):
            counts[k][train[i - k : i], train[i]] += 1
            totals[k][train[i - k : i]] += 1
    right = 0
    for i, ch in enumerate(text):
        p = {c: 1.0 / len(vocab) for c in vocab}
        for k in range(min(order, i + 1)):
            ctx = text[i - k : i]
            if totals[k][ctx] == 0:
                continue
            n = float(totals[k][ctx])
            p = {c: (counts[k][ctx, c] + kappa * p[c]) / (n + kappa) for c in vocab}
        best = max(p.values())
        right += next(c for c in vocab if p[c] == best) == ch
    return right / len(text)


def test_streamed_accuracy_equals_an_independent_greedy_count():
    train, text = challenge_text(None, 0.1, "train")[:60_000], challenge_text(None, 0.1, "test")[:1500]
    got = score(NGram(train, ORDER), text)
    assert got.chars == 1500 and got.unpredicted == 0
    assert got.accuracy == independent_accuracy(train, text)
    assert 0.2 < got.accuracy < 0.9 and 1.0 < got.bits_per_char < 5.0


def test_the_scorer_refuses_what_is_not_a_distribution():
    assert checked({"a": 0.5, "b": 0.5}, 0)
    assert checked({"a": 0.25}, 0)  # characters left out: given nothing
    for bad, why in (
        ([0.5, 0.5], "expected a non-empty dict"),
        ({}, "expected a non-empty dict"),
        ({"ab": 1.0}, "one-character strings"),
        ({1: 1.0}, "one-character strings"),
        ({"a": "x"}, "expected a number"),
        ({"a": -0.1, "b": 1.1}, "finite number >= 0"),
        ({"a": math.nan}, "finite number >= 0"),
        ({"a": 2.0, "b": 1.0}, "sums to 3"),
        ({"a": 0.0}, "sums to 0"),
    ):
        with pytest.raises(NotADistribution, match=why):
            checked(bad, 7)

    class Unpredicting:  # gives the true character nothing: counted, and the figure over the others
        def reset(self) -> None:
            pass

        def predict(self) -> dict:
            return {"a": 1.0}

        def observe(self, char: str) -> None:
            pass

    s = score(Unpredicting(), "aab")
    assert (s.right, s.unpredicted, s.bits_per_char) == (2, 1, 0.0)


def test_the_references_streams_equal_their_models_whole_forward():
    from sweep.methods.lm.gpt_model import GPTModel
    from sweep.methods.lm.mlp_model import MLPModel
    from sweep.methods.lm.streaming import GPTStream, MLPStream

    torch.manual_seed(0)
    vocab = "\nabcdefgh"
    ids = torch.randint(len(vocab), (40,)).tolist()
    text = "".join(vocab[i] for i in ids)
    gpt = GPTModel(len(vocab) + 1, 16, 2, 2, 16, 0.0).eval()
    mlp = MLPModel(len(vocab) + 1, 4, 8, 16).eval()
    for model, stream in ((gpt, GPTStream(gpt, vocab)), (mlp, MLPStream(mlp, vocab))):
        stream.reset()
        fed = [0]  # the stream starts from a newline (id 0)
        for t, ch in enumerate(text):
            stream.observe(ch)
            fed.append(ids[t])
            if model is gpt and len(fed) > 16:  # a full cache kept its last half: positions from 0 again
                seen = len(fed) - 16 // 2 * ((len(fed) - 1) // (16 // 2) - 1)
                window = fed[-seen:]
            else:
                window = fed[-16:] if model is gpt else fed
            with torch.no_grad():
                whole = model(torch.tensor([window]))[0, -1]
            assert torch.allclose(stream.logits, whole, atol=1e-5), (type(model).__name__, t)
        p = stream.predict()
        assert list(p) == list(vocab) and abs(sum(p.values()) - 1) < 1e-5


@pytest.mark.slow
def test_a_users_model_as_a_single_run_and_in_a_round_with_the_references(store, tmp_path):
    user = tmp_path / "my_model.py"
    user.write_text(USER)
    raises = tmp_path / "raises.py"
    raises.write_text("def train(train_text, valid_text=None):\n    raise ValueError('no idea')\n")
    slow = tmp_path / "slow.py"
    slow.write_text("import time\n\ndef train(train_text, valid_text=None):\n    time.sleep(60)\n")
    fast = ["challenge.score_chars=600", "device=cpu"]

    # a single run: its accuracy is the independent count on the test split's first 600 characters
    p = run_sweep("method=char_model", "problem=chars", f"method.path={user}:train", "tracker=energy", *fast,
                  cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    run = MlflowClient(store).search_runs([MlflowClient(store).get_experiment_by_name("sweep").experiment_id])[0]
    m = run.data.metrics
    train, test = challenge_text(None, 0.1, "train"), challenge_text(None, 0.1, "test")[:600]
    assert m["accuracy"] == m["test_accuracy"] == independent_accuracy(train, test, order=2, kappa=0.0)
    assert m["scored_chars"] == 600 and m["valid_accuracy"] > 0 and m["energy_modelled"] == 1.0
    assert m["energy_pj"] > 0 and m["train_cpu_s"] > 0

    # the documented outcomes, each before any job (exit 2, one line) or as a FAILED run with its reason
    missing = run_sweep("method=char_model", "problem=chars", "method.path=examples/char_models/nothere.py:train")
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0, missing.stderr
    assert "method.path=examples/char_models/nothere.py:train: no file" in missing.stderr
    shape = run_sweep("method=char_model", "problem=chars", f"method.path={user}:Model", *fast, cwd=tmp_path)
    assert shape.returncode == 2 and "cannot be called as Model(train_text, valid_text)" in shape.stderr
    wrong = run_sweep("method=char_model", "problem=chars", f"method.path={raises}:train", *fast, cwd=tmp_path)
    assert wrong.returncode == 1 and "train() failed: raised ValueError: no idea" in wrong.stderr
    broken = run_sweep("method=char_model", "problem=chars", f"method.path={NO_STREAM}", *fast, cwd=tmp_path)
    assert broken.returncode == 1 and "train() returned a Guess without observe" in broken.stderr
    late = run_sweep("method=char_model", "problem=chars", f"method.path={slow}:train", "challenge.max_train_s=2",
                     *fast, cwd=tmp_path)  # fmt: skip
    assert late.returncode == 1 and "training ran past challenge.max_train_s=2 (its process killed)" in late.stderr
    gamed = [run_sweep("method=char_model", "problem=chars", f"method.path={MEMORISE}", *fast, *gate, cwd=tmp_path)
             for gate in ([], ["challenge.gate_split=valid"])]  # fmt: skip
    assert "accuracy=1.000" in gamed[1].stdout and "accuracy=1.000" not in gamed[0].stdout, gamed[0].stdout

    # a round: the user's file ranked with the n-gram reference; a broken entrant out, for its reason
    models = f"challenge.models=[{user}:train,{NOT_DIST}]"
    p = run_sweep("sweeps=char_challenge", models, f"challenge.references=[{NGRAM}]", *fast,
                  "challenge.accuracy_floor=0.2", "challenge.energy_budget_j=1", cwd=tmp_path, timeout=600)  # fmt: skip
    assert p.returncode == 1, p.stderr  # an entrant broke
    out = tmp_path / "board"
    shown = forked_sweep.python_m(
        "sweep.compare", "char_challenge", "--out", str(out), cwd=tmp_path, env={"COLUMNS": "80"}, timeout=300
    )
    assert shown.returncode == 0, shown.stderr
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80
    rows = {r["path"]: r for r in csv.DictReader((out / "leaderboard.csv").open())}
    assert {p for p, r in rows.items() if r["rank_floor"]} == {f"{user}:train", NGRAM}
    assert all(rows[p]["finished"] == "3" and rows[p]["energy_kind"] == "modelled" for p in (NGRAM, f"{user}:train"))
    assert "predict() before character 0 sums to 3" in rows[NOT_DIST]["not_ranked"]
    assert "gated on test: a text train() never received" in shown.stdout and "scorer" in shown.stdout
    assert "cv of training J" in shown.stdout
