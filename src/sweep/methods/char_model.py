"""method=char_model: a user's own character model, `train(train_text, valid_text=None) -> model` with `reset()`,
`predict() -> dict[str, float]` and `observe(char)` (the group's wikitext challenge's interface), trained and scored
as the group does, with the three fixes docs/char_challenge.md gives.

`method.path` names the function (sweep.methods.char_entrant: a file or a module; checked before any job starts). The
timed solve is training alone (sweep.methods.char_entrant: the training and validation texts of problem=chars's
corpus, three splits: problems/chars.py `challenge_text`), capped at `max_train_s`. After the clock the test
text is read and both the validation and the test text are streamed through the model (sweep.methods.char_stream),
their first `score_chars` characters each; `accuracy` is the gated split's (`gate_split`: test, which the model
never received; valid, the group's rule, which train() was given).

Energy: on a CUDA device, the GPU's counter around training (sweep.energy.meter.meter_once: idle measured on the
host, the calibration probe, and what the group's fixed 50 W idle would have reported beside it); elsewhere
modelled, the run's `energy_pj` under tracker=energy: two of the model's own torch optimizer steps traced
(sweep.challenge.sampled_steps) times its steps, or, for a model with no torch optimizer step, the automatic
numpy trace of its whole training. Evaluation is never charged energy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

from sweep.config.fields import Rule, choice, positive_finite, positive_int
from sweep.energy.meter import meter_once
from sweep.errors import ConfigError
from sweep.methods import char_entrant as entrant
from sweep.methods.base import Context, MethodBase, Outcome
from sweep.methods.char_stream import score
from sweep.methods.solver import SOLVER_SHA_TAG
from sweep.problems.chars import WIKITEXT_TEST, challenge_text
from sweep.sandbox import target
from sweep.trace.source import METHOD, Source

SOURCE_ARTIFACT = "char_model.py"  # the model's source, as the run measured it
GATES = ("test", "valid")


@dataclass
class CharModel(MethodBase):
    problems: ClassVar[tuple[str, ...]] = ("chars",)
    trace_source: ClassVar[str] = Source.AUTO.value  # a user's model has no hand-placed trace
    meters_itself: ClassVar[bool] = True  # its training is metered once, inside solve (not solved again to meter)
    field_rules: ClassVar[tuple[Rule, ...]] = (
        target.rule("method.path", "my_model.py:train"),
        Rule("method.max_train_s", "a finite number > 0 (set as challenge.max_train_s)", positive_finite),
        Rule("method.score_chars", "an integer >= 1 (set as challenge.score_chars)", positive_int),
        choice("method.gate_split", GATES, " (set as challenge.gate_split)"),
    )

    name: str = "char_model"
    # train(train_text, valid_text=None); the default is the project's n-gram reference
    path: str = "sweep.challenge.ngram:train"
    max_train_s: float = 300.0  # the group's rule: training past it is disqualified
    score_chars: int = 60_000  # characters of each split streamed (the group's TEST_CHARS)
    gate_split: str = "test"  # the split `accuracy` is of: test (never given to train) or valid (the group's)

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        if cfg.select("tracker.source", METHOD) not in (METHOD, Source.AUTO.value):
            raise ConfigError(
                f"tracker.source={cfg.select('tracker.source')!r} is not allowed for method=char_model: expected "
                "auto (a user's model has no hand-placed trace)"
            )
        fraction = cfg.select("problem.val_fraction")
        if not cfg.select("problem.path") or not _is_dir(cfg.select("problem.path")):
            if fraction is not None and not fraction < 0.5:
                raise ConfigError(
                    f"problem.val_fraction={fraction} is not allowed for method=char_model: expected below 0.5 "
                    "(a file is cut into training, validation and test text, the last two val_fraction each)"
                )
        elif not _is_dir(cfg.select("problem.path"), WIKITEXT_TEST):
            raise ConfigError(
                f"problem.path={cfg.select('problem.path')!r} is a directory without {WIKITEXT_TEST}: "
                "method=char_model scores the test split"
            )
        entrant.check(str(cfg.select("method.path")))  # the file, the function, its signature: in a sandbox

    def warmup(self, ctx: Context) -> None:
        """Nothing: a user's model pays its own start-up inside training, as the group's clock charges it."""

    def solve(self, ctx: Context) -> Outcome:
        p, be = ctx.problem, ctx.backend
        train, valid = (challenge_text(p.path, p.val_fraction, s) for s in ("train", "valid"))
        on_gpu = be.name == "torch" and str(be.device).startswith("cuda")
        metered: dict[str, Any] = {}

        def meter(call: Any) -> Any:  # the GPU's counter around the training call alone
            device = SimpleNamespace(backend=be.name, torch_device=be.device)
            out, metered["metrics"], metered["tags"] = meter_once(call, device, be.clock)
            return out

        traced = ctx.trace.enabled and not on_gpu
        args = (self.path, train, valid, p.seed, self.max_train_s, traced)
        trained = entrant.start(*args, around=meter) if on_gpu else entrant.start(*args)
        if trained.trace is not None:
            ctx.trace.extend(trained.trace)  # the training's, as its process traced it (its escaped values too)

        def evaluate(o: Outcome) -> None:
            texts = {"valid": valid, "test": challenge_text(p.path, p.val_fraction, "test")}  # after training only
            try:
                scores = {s: score(trained.model, t[: self.score_chars]) for s, t in texts.items()}
            finally:
                trained.close()
            gated = scores[self.gate_split]
            o.accuracy = gated.accuracy
            for s, sc in scores.items():
                o.extra |= {
                    f"{s}_accuracy": sc.accuracy,
                    f"{s}_bits_per_char": sc.bits_per_char,
                    f"{s}_unpredicted": float(sc.unpredicted),
                    f"{s}_eval_s": sc.seconds,
                }
            o.extra |= {
                "bits_per_char": gated.bits_per_char,
                "bits_per_char_partial": float(gated.unpredicted > 0),  # a character given no probability
                "scored_chars": float(gated.chars),
                "eval_s": sum(sc.seconds for sc in scores.values()),
            }

        sampled = len(trained.step_traces) == 2
        return Outcome(
            steps=trained.steps if sampled else 0,
            step_traces=trained.step_traces if sampled else {},
            extra={
                "train_s": trained.train_s,
                "optimizer_steps": float(trained.steps),
                "train_cpu_s": trained.train_cpu_s,
                # 1: tracker=energy's energy_pj is its training's (modelled): a torch model's two sampled optimizer
                # steps times its steps, another's numpy trace of its whole training where it saw work (a model
                # that trains in plain Python has none: not modelled, not ranked as free)
                "energy_modelled": float(traced and (sampled if trained.torch_model else bool(trained.trace))),
                "train_chars": float(len(train)),
                **metered.get("metrics", {}),
            },
            tags={SOLVER_SHA_TAG: trained.sha, **metered.get("tags", {})},
            artifacts={SOURCE_ARTIFACT: trained.source},
            evaluate=evaluate,
        )


def _is_dir(path: Any, inside: str = "") -> bool:
    p = Path(str(path)).expanduser()
    return (p / inside).is_file() if inside else p.is_dir()
