"""The project's trained character models as entrants of the character challenge, `train(train_text,
valid_text=None)`: references `sweeps=char_challenge` ranks users' models against, run by the same harness under
the same rules (`method=char_model method.path=sweep.challenge.char_references:gpt`); the third is the numpy
n-gram, `sweep.challenge.ngram:train`, in a module without torch.

- `mlp_lm`, `gpt`: the project's Bengio MLP and nanoGPT transformer (sweep.methods.lm), trained by the project's
  step (AdamW, warm-up and cosine decay, clipping) on nanoGPT's random windows, then read as streams with a
  key/value cache (sweep.methods.lm.streaming).
Sizes are small, for a round on a 2-core CPU in minutes (their constants below); each reads at most MAX_CHARS of
the training text (WikiText-103's 540 M characters would not fit the references' budgets). They train on a CUDA
GPU where torch sees one, float32. The harness has seeded numpy's and torch's generators from the run's seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sweep.challenge.ngram import MAX_CHARS

try:  # at the top, as a torch model's file should: the sandbox loads it before training's clock starts
    import torch  # noqa: F401
except ImportError:  # a numpy-only installation: the n-gram alone
    pass

# the trained references: sizes and steps for a round on 2 CPU cores (docs/char_challenge.md)
MLP = {"context": 8, "n_embd": 24, "hidden": 256, "max_steps": 300, "warmup_steps": 30, "batch_size": 32}
GPT = {"n_layer": 2, "n_head": 4, "n_embd": 48, "max_steps": 300, "warmup_steps": 30, "batch_size": 16}
BLOCK = 64  # the gpt's positions (and both models' training windows)


def mlp_lm(train_text: str, valid_text: str | None = None) -> Any:
    from sweep.methods.lm.mlp_lm import MLPLM  # noqa: PLC0415 - torch: only for this reference
    from sweep.methods.lm.streaming import MLPStream  # noqa: PLC0415

    model, vocab = _trained(MLPLM(**MLP), train_text)
    return MLPStream(model, vocab)


def gpt(train_text: str, valid_text: str | None = None) -> Any:
    from sweep.methods.lm.gpt import GPT as GPTMethod  # noqa: PLC0415 - torch: only for this reference
    from sweep.methods.lm.streaming import GPTStream  # noqa: PLC0415

    model, vocab = _trained(GPTMethod(**GPT), train_text)
    return GPTStream(model, vocab)


def _trained(method: Any, text: str) -> tuple[Any, str]:
    """`method`'s model (sweep.methods.lm.training: its hyper-parameters) trained on `text`, and its vocabulary."""
    import torch  # noqa: PLC0415

    from sweep.methods.lm.train import adamw, step  # noqa: PLC0415
    from sweep.problems.chars import encode  # noqa: PLC0415

    text = text[:MAX_CHARS]
    data = encode(text, text[-BLOCK - 1 :], "training text", BLOCK, 0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = method.model(len(data.vocab) + 1, BLOCK).to(device)  # one more id: a character the text lacks
    opt = adamw(model, method, device)
    rng = np.random.RandomState(np.random.randint(2**31))  # the harness seeded numpy
    for s in range(method.max_steps):
        for group in opt.param_groups:
            group["lr"] = method.lr_at(s)
        x, y = (torch.from_numpy(a).to(device) for a in data.batch(rng, method.batch_size))
        step(model, model.forward, opt, x, y, method.grad_clip)
    return model, data.vocab
