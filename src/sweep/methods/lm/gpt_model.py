"""The gpt's model (method=gpt): a decoder-only transformer over characters, as nanoGPT's model.py (Karpathy)
reads: token and position embeddings, `n_layer` pre-LayerNorm blocks of causal self-attention and a 4x GELU MLP,
a final LayerNorm and a head tied to the token embedding. No biases (nanoGPT's `bias=False`). train.py trains it.
Attention is torch's fused kernel (`sdpa`) or nanoGPT's written-out fallback (`math`: the T x T scores stored);
`checkpoint` recomputes each block's activations in the backward pass (torch.utils.checkpoint) instead of keeping them.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout: float, attention: str = "sdpa") -> None:
        super().__init__()
        self.attention = attention
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)  # query, key, value of every head at once
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.dropout = n_head, dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        p = self.dropout if self.training else 0.0
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:  # nanoGPT's path without flash attention: (B, nh, T, T) scores in memory
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = F.dropout(F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1), p)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # the heads side by side again
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd: int, dropout: float) -> None:
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=False)
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout: float, attention: str = "sdpa") -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, bias=False)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout, attention)
        self.ln_2 = nn.LayerNorm(n_embd, bias=False)
        self.mlp = MLP(n_embd, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPTModel(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        block_size: int,
        n_layer: int,
        n_head: int,
        n_embd: int,
        dropout: float,
        attention: str = "sdpa",
        checkpoint: bool = False,
    ):
        super().__init__()
        self.block_size, self.checkpoint = block_size, checkpoint
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList([Block(n_embd, n_head, dropout, attention) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd, bias=False)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying (nanoGPT; Press & Wolf 2017)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, vocab) of the next character at every position of idx (B, T)."""
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            # use_reentrant=False: the recompute runs under autograd's own hooks (torch's recommended form)
            x = checkpoint(block, x, use_reentrant=False) if self.checkpoint and self.training else block(x)
        return self.lm_head(self.ln_f(x))
