"""The mlp_lm's model (Bengio et al. 2003): next-character logits at every position of a block from the
embeddings of the `context` characters up to it, concatenated, through one tanh layer."""

from __future__ import annotations

import torch
import torch.nn as nn


class MLPModel(nn.Module):
    def __init__(self, vocab_size: int, context: int, n_embd: int, hidden: int) -> None:
        super().__init__()
        self.context, self.pad = context, vocab_size  # the id before a block's first character
        self.wte = nn.Embedding(vocab_size + 1, n_embd)
        self.fc = nn.Linear(context * n_embd, hidden)
        self.lm_head = nn.Linear(hidden, vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, vocab) of the next character at every position of idx (B, T)."""
        B, T = idx.shape
        pad = torch.full((B, self.context - 1), self.pad, dtype=idx.dtype, device=idx.device)
        windows = torch.cat([pad, idx], dim=1).unfold(1, self.context, 1)  # (B, T, context): the ids up to each
        x = self.wte(windows).flatten(2)  # (B, T, context * n_embd)
        return self.lm_head(torch.tanh(self.fc(x)))
