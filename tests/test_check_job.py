"""check_job: the one check every path runs, stage by stage (fields -> each option class's own check ->
method x problem -> memory -> price), so that a config with several faults is told the most basic one first,
and each field's rule lives on the class that owns the field."""

from __future__ import annotations

import os

import pytest

from sweep.config.check import check_job
from sweep.errors import ConfigError
from tests.conftest import compose

BIG = ("problem.n_bits=100000", "problem.n_train=1000000")  # ~1.6 TB of data: more than any machine has left


def test_a_fields_rule_comes_before_an_option_classes_own_check():
    cfg = compose("method.lr=-1", "method.hidden=1000", "variant=tiled", "variant.tile_size=7")
    with pytest.raises(ConfigError, match=r"^method\.lr=-1.0 is not allowed"):
        check_job(cfg)
    with pytest.raises(ConfigError, match=r"^variant\.tile_size=7"):
        check_job(compose("method.hidden=1000", "variant=tiled", "variant.tile_size=7"))


def test_method_x_problem_comes_before_an_option_classes_own_check():
    """An option's own check reads the fields of the problems its method applies to (sgd's reads the problem's
    loss, which problem=chars has not), so a method that does not apply is refused first."""
    with pytest.raises(ConfigError, match=r"^method=gf2 does not apply to problem=sparse_sum"):
        check_job(compose("method=gf2", "problem=sparse_sum", "variant=tiled"))
    with pytest.raises(ConfigError, match=r"^variant=tiled does not apply to method=gf2: a variant orders the MLP"):
        check_job(compose("method=gf2", "variant=tiled"))  # method x variant, before the variant's own check
    with pytest.raises(ConfigError, match=r"^method=sgd does not apply to problem=chars") as e:
        check_job(compose("method=sgd", "problem=chars"))
    # `problem=chars` alone (sgd is the default method): the line names the methods that take it
    assert str(e.value).endswith("; problem=chars takes method in {bigram, char_model, gpt, mlp_lm}"), e.value


def test_method_x_problem_comes_before_memory():
    with pytest.raises(ConfigError, match=r"^method=gf2 does not apply"):
        check_job(compose("method=gf2", "problem=sparse_sum", *BIG))
    with pytest.raises(ConfigError, match=r"^the job needs about .* of memory"):
        check_job(compose("method=gf2", *BIG))


def test_memory_comes_before_price_and_price_only_for_a_modal_job():
    with pytest.raises(ConfigError, match=r"^the job needs about"):
        check_job(compose("method=gf2", *BIG), where="modal", gpu="NO_SUCH_GPU")
    with pytest.raises(ConfigError, match=r"^device\.gpu: no Modal price for gpu='NO_SUCH_GPU'"):
        check_job(compose("method=gf2"), where="modal", gpu="NO_SUCH_GPU")
    check_job(compose("method=gf2"), where="local", gpu="NO_SUCH_GPU")  # priced only where Modal bills it


def test_a_price_table_that_cannot_be_read_is_one_line_naming_the_launchers_key(tmp_path):
    """hydra.launcher.modal.prices=/nonexistent with a job for Modal was OmegaConf's FileNotFoundError, a
    traceback of 57 lines (a FIFO would have waited for ever): one line naming the key and the form expected."""
    (tmp_path / "fifo").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "words.yaml").write_text("usd_per_hour:\n  CPU: cheap\n")
    (tmp_path / "other.yaml").write_text("price: 1\n")
    for path, why in (
        (tmp_path / "none.yaml", "no such file"),
        (tmp_path / "fifo", "not a regular file"),
        (tmp_path, "not a regular file"),
        (tmp_path / "words.yaml", "ValueError: could not convert string to float: 'cheap'"),
        (tmp_path / "other.yaml", "ConfigAttributeError: Missing key usd_per_hour"),
    ):
        with pytest.raises(ConfigError) as e:
            check_job(compose("method=gf2"), where="modal", prices=str(path))
        assert str(e.value) == (
            f"hydra.launcher.modal.prices={path} is not allowed: {why}: expected a YAML file of usd_per_hour: "
            "{GPU type: dollars an hour}, as conf/prices/modal_gpu.yaml (null: that file)"
        )


@pytest.mark.parametrize(
    "overrides, field",
    [
        (("method=km", "method.influence_samples=0"), "method.influence_samples"),  # KM's field, KM's rule
        (("method=fourier", "method.chunk=-1"), "method.chunk"),  # Fourier's
        (("tracker=none", "tracker.scope=every"), "tracker.scope"),  # TrackerBase's, on the option that builds nothing
        (("tracker=energy", "tracker.meter=sometimes"), "tracker.meter"),  # EnergyTracker's
        (("problem.k_sparse=30",), "problem.k_sparse"),  # Problem's, against problem.n_bits
    ],
)
def test_each_field_is_checked_by_the_class_that_owns_it(overrides, field):
    with pytest.raises(ConfigError, match=rf"^{field}=.* is not allowed: expected"):
        check_job(compose(*overrides))


def test_a_field_no_option_has_is_not_checked():
    check_job(compose("method=gf2"))  # gf2 has no lr, hidden, ...: nothing to check, nothing raised


IN_01 = "expected a number in (0, 1]: the test accuracy at which training stops"


@pytest.mark.parametrize(
    "overrides, line",
    [
        (("method.target_accuracy=-1",), f"method.target_accuracy=-1.0 is not allowed: {IN_01}"),
        (("method.target_accuracy=nan",), f"method.target_accuracy=nan is not allowed: {IN_01}"),
        (("method.target_accuracy=5",), f"method.target_accuracy=5.0 is not allowed: {IN_01}"),
        (("method=forward_forward", "method.target_accuracy=0"), f"method.target_accuracy=0.0 is not allowed: {IN_01}"),
        (("method=curriculum", "method.widen_scale=nan"), "method.widen_scale=nan is not allowed: expected a finite"),
        (("method=curriculum", "method.schedule=[0,30]"), "method.schedule=[0, 30] is not allowed: expected a list"),
        (("method=sign_sgd", "method.dead_zone=nan"), "method.dead_zone=nan is not allowed: expected a finite number"),
        (("method=sign_sgd", "method.dead_zone=-1"), "method.dead_zone=-1.0 is not allowed: expected a finite number"),
        (("method=forward_forward", "method.threshold=nan"), "method.threshold=nan is not allowed: expected a finite"),
        (("method=forward_forward", "method.threshold=-inf"), "method.threshold=-inf is not allowed: expected a"),
        (
            ("method.batch_size=5000", "problem.n_train=1000"),
            "method.batch_size=5000 is not allowed: expected an integer from 1 to problem.n_train",
        ),
        (("variant=fused", "variant.tile_size=50"), "variant.tile_size=50 is not allowed: expected 0: only the tiled"),
        (("variant=fused", "method=gf2"), "variant=fused does not apply to method=gf2: a variant orders the MLP's"),
        (("variant=perlayer", "method=forward_forward"), "variant=perlayer does not apply to method=forward_forward"),
        # a prober's round of issue 43: torch segfaulted at 100,000 threads (no line, no run); mps failed the run
        (("device=torch_cpu", "device.threads=100000"), "device.threads=100000 is not allowed: expected an integer"),
        (
            ("device=torch_cpu", "device.torch_device=mps"),
            "device.torch_device='mps' is not allowed: expected cpu, cuda",
        ),
        # issue 43, seventh round: ByteDMD's exact int64 costs overflowed, negative at 1e11, OverflowError at 1e30
        (
            ("tracker=bytedmd", "tracker.bytes_per_element=100000000000"),
            "tracker.bytes_per_element=100000000000 is not allowed: expected an integer from 1 to 32",
        ),
        # and an unknown torch.compile backend failed the run after its start (torch's InvalidBackend)
        (
            ("device=torch_cpu", "device.compile=true", "device.compile_backend=nope"),
            "device.compile_backend='nope' is not allowed: expected a torch.compile backend: inductor, aot_eager",
        ),
    ],
)
def test_a_value_without_meaning_is_refused_by_the_class_that_owns_the_field(overrides, line):
    """Case 8 of issue 35: each of these ran and was recorded FINISHED (gf2 with variant=fused as `gf2-fused`)."""
    with pytest.raises(ConfigError) as e:
        check_job(compose(*overrides))
    assert str(e.value).startswith(line), str(e.value)


# checked by the option class's own check_config rather than a field rule: the hierarchy file must load with them;
# a tile size must divide method.hidden (the line lists the divisors); a corpus's path must hold a corpus
CHECKED_WHOLE = {
    ("tracker", "energy"): {"hierarchy", "levels", "ops_pj", "bytes_per_float"},
    ("problem", "chars"): {"path"},  # the corpus must be there
    **{("variant", tiled): {"tile_size"} for tiled in ("tiled", "tiled_fused", "tiled_w2")},
}


def test_every_value_field_has_a_rule():
    """Case 8 of issue 35 ("every value field has a rule"). Each option class's fields (the values a user may set)
    each have a rule on the class, or are checked
    together by its own check_config (CHECKED_WHOLE): none runs unchecked."""
    import dataclasses
    import inspect

    from hydra.utils import get_class
    from omegaconf import OmegaConf

    from sweep.config.schema import SCHEMAS
    from sweep.paths import CONF_DIR

    unruled = []
    for group in ("problem", "method", "variant", "tracker"):
        for path in sorted((CONF_DIR / group).glob("*.yaml")):
            schema = SCHEMAS[group].get(path.stem)
            target = OmegaConf.load(path).get("_target_") or getattr(schema, "_target_", None)
            cls = get_class(target or schema.source_class)
            fields = (
                [f.name for f in dataclasses.fields(cls)]
                if dataclasses.is_dataclass(cls)
                else list(inspect.signature(cls).parameters)
            )
            ruled = {r.field.split(".", 1)[1] for r in getattr(cls, "field_rules", ())}
            ruled |= CHECKED_WHOLE.get((group, path.stem), set())
            unruled += [f"{group}={path.stem}: {f}" for f in fields if f not in ruled and f != "name"]
    assert unruled == []


LM = ("problem=chars", "device=torch_cpu")


@pytest.mark.parametrize(
    "overrides, said, lower",
    [
        (("method=mlp_lm", *LM, "method.context=100000"), "of memory (activations", "method.context=100000"),
        (("method=mlp_lm", *LM, "method.hidden=100000000"), "of memory (activations", "method.hidden=100000000"),
        (("method=gpt", *LM, "method.n_embd=200000"), "of memory (weights", "method.n_embd=200000"),
        (("method=gpt", *LM, "method.batch_size=1000000"), "of memory (activations", "method.batch_size=1000000"),
        (("method=mlp_lm", *LM, "method.batch_size=1000000"), "of memory (activations", "method.batch_size=1000000"),
        (("method=gpt", *LM, "method.n_layer=100000"), "of memory (activations", "method.n_layer=100000"),
        (
            ("method=gpt", *LM, "problem.block_size=20000", "problem.val_chars=0"),
            "more than method.time_budget_s=300",
            "problem.block_size=20000",
        ),
        (
            ("method=smt", "problem.n_bits=300", "problem.k_sparse=12"),
            "more than a day (no time_limit_s is set)",
            "problem.n_bits=300, problem.k_sparse=12",
        ),
        # a run that never reaches its target runs every epoch: nothing stops it without a limit (issue 43)
        (("method=sgd", "method.max_epochs=1000000000"), "the job may never end", "method.max_epochs=1000000000, or"),
        (
            ("method=forward_forward", "method.max_epochs=1000000000"),
            "1,000,000,000 x one epoch",
            "method.max_epochs=1000000000, or bound",
        ),
        (("method=curriculum", "method.max_epochs=1000000000"), "more than a day", "method.max_epochs=1000000000, or"),
        # and a character model's steps, where its time budget does not stop it (issue 43, seventh round: one step
        # was the whole estimate of `time_budget_s=1e30 max_steps=1000000000`)
        (
            (
                "method=gpt",
                "problem=chars",
                "device=torch_cpu",
                "method.time_budget_s=1e30",
                "method.max_steps=1000000000",
            ),
            "the job may never end: a run that does not stop early needs 1.6e+18 operations (1,000,000,000 x one "
            "training step",
            "method.max_steps=1000000000, or bound",
        ),
        # a tile's step in Python, whatever its arithmetic (a prober's round: 40+ s, then killed): 3.2e6 a epoch
        (
            ("variant=tiled", "variant.tile_size=1", "method.hidden=100000", "method.max_epochs=10000"),
            "(10,000 x 3,200,000 steps in Python",
            "method.max_epochs=10000, method.hidden=100000, or bound",
        ),
        (("method=sgd", "problem.n_train=100000000000"), "of memory (", "problem.n_train=100000000000"),
        # the test set's hidden layer is the same array as the train set's: n_test named, not the defaults beside it
        (("method=sgd", "problem.n_test=2000000000"), "of memory (activations", "problem.n_test=2000000000"),
        (("method=km", "problem.n_bits=50000"), "of memory (queries", "problem.n_bits=50000"),
        (("method=ols", "problem=sparse_sum", "problem.n_bits=50000"), "(normal equations", "problem.n_bits=50000"),
        (("method=gf2", "problem.n_bits=200000"), "of memory (rows and basis", "problem.n_bits=200000"),
        (
            ("method=fourier", "problem.n_bits=300", "problem.k_sparse=8", "method.max_subsets=100000000000000000000"),
            "about 8 years even at",
            "problem.n_bits=300, problem.k_sparse=8",
        ),
        # a method's scratch sized by its own option, raised: every subset, every pair at once (the fourier run
        # failed on a 9.8 GB array; smt at n_bits=5000 climbed to 18.6 GB)
        (
            ("method=fourier", "problem.n_bits=220", "method.chunk=1000000000"),
            "of memory (a chunk of subsets",
            "method.chunk=1000000000",
        ),
        (
            ("method=smt", "problem.n_bits=8000", "problem.k_sparse=3", "method.pair_block=100000000000"),
            "of memory (a pair step",
            "method.pair_block=100000000000",
        ),
    ],
)
def test_every_size_that_exhausts_memory_or_time_is_refused_by_the_one_estimate(overrides, said, lower):
    """Issue 43: the character models were outside the estimate (a torch allocation traceback and a FAILED
    record, or minutes until killed), smt's search had no bound; each method declares its footprint and least
    work (sweep.config.footprint), the one estimate refuses before any job, naming the field set too big."""
    with pytest.raises(ConfigError) as e:
        check_job(compose(*overrides), available=lambda: 32e9)
    line = str(e.value)
    assert said in line and "\n" not in line and f": lower {lower}" in line, line


def test_the_shipped_sizes_and_a_time_limit_that_allows_them_pass_the_estimate():
    for overrides in (("method=gpt", *LM), ("method=mlp_lm", *LM), ("method=smt", "problem.n_bits=50"), ()):
        check_job(compose(*overrides), available=lambda: 16e9)
    # n=100, k=8 parity: about 90 minutes at the estimate's (optimistic) rate: over a 1-hour limit, within a day
    smt = ("method=smt", "problem.n_bits=100", "problem.k_sparse=8")
    check_job(compose(*smt), available=lambda: 16e9)
    with pytest.raises(ConfigError, match=r"than the launcher's time_limit_s=3600: lower problem\.n_bits=100, problem"):
        check_job(compose(*smt), available=lambda: 16e9, time_limit_s=3600)
    # every epoch of 1e8 (~19 hours at the estimate's rate) fits a day; 1e9 epochs fit only under a limit that
    # stops the run, the launcher's or the method's own budget
    check_job(compose("method=sgd", "method.max_epochs=100000000"), available=lambda: 16e9)
    check_job(compose("method=sgd", "method.max_epochs=1000000000"), available=lambda: 16e9, time_limit_s=3600)
    # the preset's smallest tile at its widest W1 passes; one epoch of 100,000 tiles a batch does not fit 10 s
    check_job(compose("variant=tiled", "variant.tile_size=1", "method.hidden=1000"), available=lambda: 16e9)
    tiles = ("variant=tiled", "variant.tile_size=1", "method.hidden=100000")
    with pytest.raises(ConfigError, match=r"needs at least .* \(3,200,000 steps in Python 8\.0e\+11\), about 16 s"):
        check_job(compose(*tiles), available=lambda: 16e9, time_limit_s=10)


def test_a_run_is_checked_where_it_runs_against_the_limit_its_launcher_holds_it_to():
    """The worker checks its job again (sweep.job.prepare): with the launcher's time limit, as the plan did, so a
    job a limit of two days lets through is not refused there by the one-day default; a preset's time_limit_s
    stands where hydra.launcher.time_limit_s is not set; under the basic launcher no limit is held."""
    from hydra.core.hydra_config import HydraConfig

    from sweep.job import run_time_limit

    smt = ("method=smt", "problem.n_bits=105", "problem.k_sparse=9")  # ~34 hours at the estimate's rate
    saved = HydraConfig.instance().cfg
    try:
        for overrides, limit in (
            (("hydra.launcher.time_limit_s=172800",), 172800),
            (("time_limit_s=100",), 100),
            (("hydra/launcher=basic", "time_limit_s=100"), None),
        ):
            cfg = compose(*smt, *overrides, hydra_section=True)
            HydraConfig.instance().set_config(cfg)
            assert run_time_limit(cfg) == limit
    finally:
        HydraConfig.instance().cfg = saved
    check_job(compose(*smt), available=lambda: 16e9, time_limit_s=172800)
    with pytest.raises(ConfigError, match=r"more than a day \(no time_limit_s is set\)"):
        check_job(compose(*smt), available=lambda: 16e9)
