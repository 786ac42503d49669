"""The trained character models (gpt_model.py, mlp_model.py) read as streams, the character challenge's interface
(`reset()`, `predict()`, `observe(char)`): each step runs one position, not the whole prefix.

- GPTStream keeps every layer's keys and values of the positions seen (a key/value cache of `block_size`
  positions), so a step is one position's projections and MLP and its attention over the cache. The positions
  are learned absolute ones up to `block_size`: a full cache keeps its last half, run again from position 0 in
  one causal pass (one pass of block_size / 2 positions every block_size / 2 characters: a constant cost per
  character on average). The stream starts from a newline (the model needs one input before its first
  prediction).
- MLPStream keeps the last `context` ids, padded as in training (and started from a newline too); a step is
  one window.
A character the training text lacks is the id `unk` (the models have one more id than the vocabulary); the
prediction is over the vocabulary alone (softmax of its logits).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


class Stream:
    def __init__(self, model: torch.nn.Module, vocab: str) -> None:
        self.model = model.eval()
        self.vocab, self.unk = vocab, len(vocab)
        self.index = {c: i for i, c in enumerate(vocab)}
        self.device = next(model.parameters()).device
        self.logits: torch.Tensor | None = None

    def predict(self) -> dict[str, float]:
        assert self.logits is not None
        p = torch.softmax(self.logits[: self.unk].float(), dim=-1)
        return dict(zip(self.vocab, p.tolist()))

    def observe(self, char: str) -> None:
        self.feed(self.index.get(char, self.unk))

    def feed(self, token: int) -> None:
        raise NotImplementedError


class GPTStream(Stream):
    @torch.no_grad()
    def reset(self) -> None:
        m = self.model
        shape = (1, m.h[0].attn.n_head, m.block_size, m.wte.weight.shape[1] // m.h[0].attn.n_head)
        self.keys = [torch.zeros(shape, device=self.device, dtype=m.wte.weight.dtype) for _ in m.h]
        self.values = [torch.zeros_like(k) for k in self.keys]
        self.ids: list[int] = []
        self.feed(self.index.get("\n", 0))

    @torch.no_grad()
    def feed(self, token: int) -> None:
        if len(self.ids) == self.model.block_size:  # full: the last half again, from position 0, in one pass
            self._prefill(self.ids[len(self.ids) // 2 :])
        self._step(token)

    def _prefill(self, tokens: list[int]) -> None:
        """The cache of `tokens` at positions 0.. (one causal pass over them, as the model's forward)."""
        m, T = self.model, len(tokens)
        x = m.wte(torch.tensor([tokens], device=self.device)) + m.wpe(torch.arange(T, device=self.device))
        for block, keys, values in zip(m.h, self.keys, self.values):
            a = block.attn
            C = x.size(-1)
            q, k, v = (
                z.view(1, T, a.n_head, C // a.n_head).transpose(1, 2) for z in a.c_attn(block.ln_1(x)).split(C, 2)
            )
            keys[:, :, :T], values[:, :, :T] = k, v
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + a.c_proj(y.transpose(1, 2).reshape(1, T, C))
            x = x + block.mlp(block.ln_2(x))
        self.ids = list(tokens)

    def _step(self, token: int) -> None:
        m, t = self.model, len(self.ids)
        x = m.wte(torch.tensor([[token]], device=self.device)) + m.wpe(torch.tensor([t], device=self.device))
        for block, keys, values in zip(m.h, self.keys, self.values):
            a = block.attn
            C = x.size(-1)
            q, k, v = (
                z.view(1, 1, a.n_head, C // a.n_head).transpose(1, 2) for z in a.c_attn(block.ln_1(x)).split(C, 2)
            )
            keys[:, :, t], values[:, :, t] = k[:, :, 0], v[:, :, 0]
            y = F.scaled_dot_product_attention(q, keys[:, :, : t + 1], values[:, :, : t + 1])
            x = x + a.c_proj(y.transpose(1, 2).reshape(1, 1, C))
            x = x + block.mlp(block.ln_2(x))
        self.ids.append(token)
        self.logits = m.lm_head(m.ln_f(x))[0, -1]


class MLPStream(Stream):
    def reset(self) -> None:
        self.window = [self.model.pad] * self.model.context
        self.feed(self.index.get("\n", 0))

    def feed(self, token: int) -> None:
        self.window = self.window[1:] + [token]
        self.logits = self._logits()

    @torch.no_grad()
    def _logits(self) -> torch.Tensor:
        m = self.model
        x = m.wte(torch.tensor(self.window, device=self.device)).flatten()
        return m.lm_head(torch.tanh(m.fc(x)))
