"""check_job: the one check every path runs, stage by stage (fields -> each option class's own check ->
method x problem -> memory -> price), so that a config with several faults is told the most basic one first,
and each field's rule lives on the class that owns the field."""

from __future__ import annotations

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
    with pytest.raises(ConfigError, match=r"^variant=tiled needs a method with hidden units"):
        check_job(compose("method=gf2", "variant=tiled"))
    with pytest.raises(ConfigError, match=r"^method=sgd does not apply to problem=chars"):
        check_job(compose("method=sgd", "problem=chars"))


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
