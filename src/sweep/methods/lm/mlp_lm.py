"""method=mlp_lm: Bengio et al. (2003)'s neural probabilistic language model over characters: the embeddings of
the last `context` characters, concatenated, through one tanh hidden layer to the next character's logits (the
paper's optional direct connections left out). The model: mlp_model.py; trained by train.py like the gpt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from sweep.config.fields import Rule, positive_int
from sweep.methods.lm.training import TRAIN_RULES, VOCAB, Training


@dataclass
class MLPLM(Training):
    field_rules: ClassVar[tuple[Rule, ...]] = (
        *TRAIN_RULES,
        Rule("method.context", "an integer >= 1", positive_int),
        Rule("method.n_embd", "an integer >= 1", positive_int),
        Rule("method.hidden", "an integer >= 1", positive_int),
    )

    name: str = "mlp_lm"
    context: int = 8  # characters the model sees (fewer at a block's start: padded with an id of its own)
    n_embd: int = 24  # the embedding of one character
    hidden: int = 256

    width_fields: ClassVar[tuple[str, ...]] = ("method.context", "method.n_embd", "method.hidden")

    @classmethod
    def weights(cls, cfg: Any) -> int:
        m = cfg.method
        return (VOCAB + 1) * m.n_embd + m.context * m.n_embd * m.hidden + m.hidden + m.hidden * VOCAB + VOCAB

    @classmethod
    def floats_per_position(cls, cfg: Any) -> int:
        """The window's ids, its embeddings (gathered, then flattened), the hidden layer before and after tanh."""
        m = cfg.method
        return m.context + 2 * m.context * m.n_embd + 3 * m.hidden

    def model(self, vocab_size: int, block_size: int) -> Any:
        from sweep.methods.lm.mlp_model import MLPModel  # noqa: PLC0415 - torch: seconds to import, only when training

        return MLPModel(vocab_size, self.context, self.n_embd, self.hidden)
