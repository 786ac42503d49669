"""method=gpt: a decoder-only transformer over characters (the model: gpt_model.py, nanoGPT's), trained by
train.py: AdamW with weight decay, warm-up and cosine decay (training.py).

Sizes are named by `method.n_layer`, `method.n_head`, `method.n_embd`; the char_lm study's three widths are
`method.n_embd=32,64,128`. Two knobs change the data a step moves and not its result (sweeps=proxy_study):
`method.attention` (sdpa: torch's fused kernel; math: the scores written out as nanoGPT's fallback does) and
`method.checkpoint` (each block's activations recomputed in the backward pass instead of kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from sweep.config.fields import Rule, choice, positive_int
from sweep.errors import ConfigError
from sweep.methods.lm.training import TRAIN_RULES, VOCAB, Training

ATTENTION = ("sdpa", "math")  # torch's scaled_dot_product_attention; the product, mask and softmax written out


@dataclass
class GPT(Training):
    """nanoGPT's shakespeare_char recipe scaled down to about a minute on 2 CPU cores (n_embd 64 over 384, 2 layers
    over 6, 1,000 steps of 32 x 64 characters)."""

    field_rules: ClassVar[tuple[Rule, ...]] = (
        *TRAIN_RULES,
        Rule("method.n_layer", "an integer >= 1", positive_int),
        Rule("method.n_head", "an integer >= 1 that divides method.n_embd", positive_int),
        Rule("method.n_embd", "an integer >= 1", positive_int),
        Rule(
            "method.dropout",
            "a number with 0 <= dropout < 1",
            lambda v, c: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1,
        ),
        choice("method.attention", ATTENTION),
        Rule("method.checkpoint", "true or false", lambda v, c: isinstance(v, bool)),
    )

    name: str = "gpt"
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    attention: str = "sdpa"  # one of ATTENTION
    checkpoint: bool = False  # activation checkpointing: recompute each block in the backward pass

    width_fields: ClassVar[tuple[str, ...]] = ("method.n_layer", "method.n_embd")

    @classmethod
    def weights(cls, cfg: Any) -> int:
        """The token embedding (tied to the head), the positions', each block's 12 n_embd^2 (attention's 4, the
        MLP's 8)."""
        m, c = cfg.method, cfg.method.n_embd
        return (VOCAB + cfg.problem.block_size) * c + m.n_layer * 12 * c * c

    @classmethod
    def floats_per_position(cls, cfg: Any) -> int:
        """Each block keeps ~20 n_embd a position for the backward (two norms, q k v, the attention's output, its
        projection, the MLP's 4 n_embd before and after the GELU)."""
        return cfg.method.n_layer * 20 * cfg.method.n_embd + 2 * cfg.method.n_embd

    @classmethod
    def extra_flops_per_position(cls, cfg: Any) -> int:
        """Causal attention: each position against block_size / 2 others on average, q.k and the weighted sum,
        forward and backward."""
        return 6 * cfg.method.n_layer * cfg.problem.block_size * cfg.method.n_embd

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        super().check_config(cfg)
        if cfg.method.n_embd % cfg.method.n_head:
            raise ConfigError(
                f"method.n_head={cfg.method.n_head} is not allowed: expected a divisor of "
                f"method.n_embd={cfg.method.n_embd} (each head takes n_embd / n_head of the embedding)"
            )

    def model(self, vocab_size: int, block_size: int) -> Any:
        from sweep.methods.lm.gpt_model import GPTModel  # noqa: PLC0415 - torch: seconds to import, only when training

        return GPTModel(
            vocab_size,
            block_size,
            self.n_layer,
            self.n_head,
            self.n_embd,
            self.dropout,
            self.attention,
            self.checkpoint,
        )
