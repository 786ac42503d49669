"""What the trained character models (gpt, mlp_lm) share: their training's hyper-parameters, the rules on them,
and the learning-rate schedule. torch-free (a config's schema imports this; the loop itself is train.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from sweep.config.fields import Rule, positive_finite, positive_int
from sweep.config.footprint import OPS_PER_S, Term, device_kind, item_bytes
from sweep.errors import ConfigError
from sweep.methods.base import Context, MethodBase, Outcome
from sweep.trace.source import Source

# the vocabulary a size estimate takes (the corpus is read by the job, not by the check): a byte's worth of
# characters; the shipped Tiny Shakespeare has 65
VOCAB = 256

_unit = lambda v, c: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1  # noqa: E731
_nonneg = lambda v, c: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0  # noqa: E731

TRAIN_RULES: tuple[Rule, ...] = (
    Rule("method.batch_size", "an integer >= 1", positive_int),
    Rule("method.lr", "a finite number > 0", positive_finite),
    Rule("method.min_lr", "a finite number >= 0 and <= method.lr", lambda v, c: _nonneg(v, c) and v <= c.method.lr),
    Rule("method.warmup_steps", "an integer >= 0", lambda v, c: isinstance(v, int) and v >= 0),
    Rule("method.weight_decay", "a finite number >= 0", _nonneg),
    Rule("method.beta1", "a number with 0 <= beta1 < 1", lambda v, c: _unit(v, c) and v < 1),
    Rule("method.beta2", "a number with 0 <= beta2 < 1", lambda v, c: _unit(v, c) and v < 1),
    Rule("method.grad_clip", "a finite number >= 0 (0: no clipping)", _nonneg),
    Rule("method.max_steps", "an integer >= 1", positive_int),
    Rule("method.eval_interval", "an integer >= 1", positive_int),
    Rule("method.target_accuracy", "a number with 0 <= target_accuracy <= 1", _unit),
    Rule("method.time_budget_s", "a finite number > 0", positive_finite),
)


@dataclass
class Training(MethodBase):
    """AdamW with decoupled weight decay on the matrices (not on norms and biases), a linear warm-up and a cosine
    decay to `min_lr` at `max_steps` (nanoGPT's schedule). Training stops at the first of: `target_accuracy` of
    validation characters reached at an evaluation (every `eval_interval` steps), `max_steps`, `time_budget_s`
    seconds (the group's rule has both a target and a budget)."""

    problems: ClassVar[tuple[str, ...]] = ("chars",)
    field_rules: ClassVar[tuple[Rule, ...]] = TRAIN_RULES
    # the traced step is torch's own operations, recorded by TorchTracer: there is no hand trace of a transformer
    trace_source: ClassVar[str] = Source.AUTO.value

    name: str = "training"
    batch_size: int = 32  # windows of problem.block_size characters a step
    lr: float = 1e-2  # small models take a large rate (measured on the shipped corpus: docs/chars.md)
    min_lr: float = 1e-3
    warmup_steps: int = 50
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99  # nanoGPT's shakespeare_char: few tokens a step
    grad_clip: float = 1.0
    max_steps: int = 1000
    eval_interval: int = 100
    target_accuracy: float = 1.0  # 1.0: no target (train to max_steps or the budget); the group's challenge: 0.70
    time_budget_s: float = 300.0  # the group's challenge: 300 s

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """torch on a CPU or a GPU trains these models; numpy does not. Their trace is the automatic one."""
        if cfg.select("device.backend") != "torch":
            raise ConfigError(
                f"method={cfg.method.name} trains with torch: device={cfg.select('device.name')} is numpy; "
                "use device=torch_cpu or device=cuda"
            )
        if cfg.select("tracker._target_") and cfg.select("tracker.source") == Source.HAND.value:
            raise ConfigError(
                f"tracker.source=hand is not allowed for method={cfg.method.name}: its step is traced by torch's "
                "own operations (tracker.source=auto, its default)"
            )

    # the formulas of the model's size (each model's own): its weights, floats kept a position for the backward,
    # operations a position beyond 6 a weight (attention's), and the fields each grows with
    width_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def weights(cls, cfg: Any) -> int:
        raise NotImplementedError

    @classmethod
    def floats_per_position(cls, cfg: Any) -> int:
        raise NotImplementedError

    @classmethod
    def extra_flops_per_position(cls, cfg: Any) -> int:
        return 0

    @classmethod
    def footprint(cls, cfg: Any) -> list[Term]:
        """Weights with their gradients and AdamW's two moments; a step's activations and logits (its float copy
        and gradient too). The vocabulary is taken as VOCAB (the corpus is read by the job)."""
        item, positions = item_bytes(cfg), cfg.method.batch_size * cfg.problem.block_size
        step = ("method.batch_size", "problem.block_size")
        return [
            Term("weights", 4 * item * cls.weights(cfg), cls.width_fields),
            Term("activations", item * positions * cls.floats_per_position(cfg), step + cls.width_fields),
            Term("logits", (item + 8) * positions * VOCAB, step),
        ]

    @classmethod
    def least_work(cls, cfg: Any) -> list[Term]:
        """What any run does, whatever its budget: one training step (forward and backward: 6 operations a weight
        a position, and attention's) and the evaluations of the validation blocks and as many training blocks
        (forward only)."""
        from sweep.problems.chars import validation_chars  # noqa: PLC0415 - methods import no problem at load

        per_position = 6 * cls.weights(cfg) + cls.extra_flops_per_position(cfg)
        positions = cfg.method.batch_size * cfg.problem.block_size
        sizes = ("method.batch_size", "problem.block_size") + cls.width_fields
        scored = 2 * validation_chars(cfg)
        return [
            Term("one training step", per_position * positions, sizes),
            Term(
                "evaluation", per_position / 3 * scored, ("problem.val_chars", "problem.block_size") + cls.width_fields
            ),
        ]

    @classmethod
    def most_work(cls, cfg: Any) -> list[Term]:
        """A run that never reaches its target: `max_steps` steps with an evaluation every `eval_interval`, or what
        `time_budget_s` allows at OPS_PER_S, whichever is less (`time_budget_s=1e30 max_steps=1000000000` passed,
        one step its whole estimate, and ran for days)."""
        step, evaluation = cls.least_work(cfg)
        steps = int(cfg.method.max_steps)
        evaluations = steps // int(cfg.method.eval_interval) + 1
        budget = float(cfg.method.time_budget_s) * OPS_PER_S[device_kind(cfg)]
        if budget < steps * step.amount + evaluations * evaluation.amount:
            return [Term("the time budget", budget, ("method.time_budget_s", "method.max_steps"))]
        return [
            Term(f"{steps:,} x one training step", steps * step.amount, ("method.max_steps", *step.fields)),
            Term(f"{evaluations:,} x evaluation", evaluations * evaluation.amount, ("method.eval_interval",)),
        ]

    def lr_at(self, step: int) -> float:
        """The learning rate of step `step` (0-based): linear warm-up, then cosine down to min_lr at max_steps."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / (self.warmup_steps + 1)
        span = max(1, self.max_steps - self.warmup_steps)
        ratio = min(1.0, (step - self.warmup_steps) / span)
        return self.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (self.lr - self.min_lr)

    def model(self, vocab_size: int, block_size: int) -> Any:
        """The torch module to train: logits (B, T, vocab_size) from ids (B, T)."""
        raise NotImplementedError

    def solve(self, ctx: Context) -> Outcome:
        from sweep.methods.lm.train import train  # noqa: PLC0415 - torch: seconds to import, only when training

        return train(self, ctx)

    def warmup(self, ctx: Context) -> None:
        """The untimed warm-up before the timed solve (torch's lazy init, torch.compile): a few steps, not a whole
        training (sweep.job.solve)."""
        from sweep.methods.lm.train import warm_up  # noqa: PLC0415 - torch: seconds to import, only when training

        warm_up(self, ctx)
