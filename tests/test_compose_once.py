"""Parity of the twin `_fast.compose_once`: a command's config composed once gives what Hydra's two compositions
give (its `get_mode` composition, then the run's or the multirun's), and what Hydra refuses is refused alike."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException
from hydra.types import RunMode
from omegaconf import OmegaConf

from tests.conftest import fast_composer


def hydra_twice(loader, overrides: list[str], then: RunMode, extra: list[str]):
    """What `@hydra.main` composes: get_mode's composition, then the command's (`extra`: Hydra's hydra.mode=...)."""
    loader.load_configuration("config", overrides, RunMode.MULTIRUN, validate_sweep_overrides=False)
    return loader.load_configuration("config", overrides + extra, then)


def as_text(cfg) -> str:
    return OmegaConf.to_yaml(cfg, resolve=False)


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_a_command_composed_once_is_hydras_config_and_hydras_refusals():
    from hydra_plugins.sweep_launcher._fast.compose_once import ComposeOnce

    with fast_composer() as (loader, _, _):
        once = ComposeOnce(loader)
        cases = [
            (["method=gf2", "problem.seed=3"], RunMode.RUN, ["hydra.mode=RUN"]),  # a single run
            (["method=gf2,km", "problem.seed=1,2"], RunMode.MULTIRUN, ["hydra.mode=MULTIRUN"]),  # -m
            (["sweeps=tiled_w1"], RunMode.MULTIRUN, []),  # a preset that sets hydra.mode itself
        ]
        for overrides, mode, extra in cases:
            want = hydra_twice(loader, overrides, mode, extra)
            got = hydra_twice(once, overrides, mode, extra)
            assert once.kept is None, "the kept config is handed out once"
            assert as_text(got) == as_text(want), overrides
            assert got.hydra.mode == mode and list(got.hydra.overrides.hydra) == list(want.hydra.overrides.hydra)
        # the second request is another command's (other overrides): composed afresh, not the kept config
        first = once.load_configuration("config", ["problem.seed=5"], RunMode.MULTIRUN, validate_sweep_overrides=False)
        other = once.load_configuration("config", ["problem.seed=6", "hydra.mode=RUN"], RunMode.RUN)
        assert other is not first and other.problem.seed == 6
        # a sweep's values in a single run: Hydra's own refusal, in its words
        with pytest.raises(ConfigCompositionException, match="Ambiguous value for argument"):
            hydra_twice(once, ["problem.seed=1,2"], RunMode.RUN, ["hydra.mode=RUN"])
        with pytest.raises(ConfigCompositionException, match="Ambiguous value for argument"):
            hydra_twice(loader, ["problem.seed=1,2"], RunMode.RUN, ["hydra.mode=RUN"])


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_a_group_left_missing_is_refused_by_a_run_as_hydra_refuses_it(tmp_path):
    """A multirun composition skips a `???` default, a run refuses it: the run composes again, for Hydra's error."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from hydra_plugins.sweep_launcher._fast.compose_once import ComposeOnce

    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "a.yaml").write_text("x: 1\n")
    (tmp_path / "config.yaml").write_text("defaults:\n  - db: ???\n  - _self_\n")
    with initialize_config_dir(config_dir=str(tmp_path), version_base="1.3", job_name="t"):
        once = ComposeOnce(GlobalHydra.instance().config_loader())
        with pytest.raises(ConfigCompositionException, match="You must specify 'db'"):
            hydra_twice(once, [], RunMode.RUN, ["hydra.mode=RUN"])
        assert hydra_twice(once, ["db=a"], RunMode.RUN, ["hydra.mode=RUN"]).db.x == 1
