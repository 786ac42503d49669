"""Hydra's own launcher test suites against the sweep launcher: `local` on its fast path (Hydra internals,
gated to the tested Hydra version; named explicitly, hydra.launcher.fast=true) and on Hydra's public path
(hydra.launcher.fast=false), and `modal` in
offline mode (the real modal Function run through Function.local() on the local worker pool). Fixtures come
from hydra-core's pytest plugin (hydra.extra.pytest_plugin)."""

from __future__ import annotations

from hydra.test_utils.launcher_common_tests import (
    BatchedSweeperTestSuite,
    IntegrationTestSuite,
    LauncherTestSuite,
)
from pytest import mark

from hydra_plugins.sweep_launcher.launcher import fast_paths, fast_paths_tested

LAUNCHERS = [
    ("local", ["hydra.launcher.fast=true"]),
    ("local", ["hydra.launcher.fast=false"]),
    ("modal", ["hydra.launcher.modal.offline=true"]),
]
QUIET = ["hydra/hydra_logging=disabled", "hydra/job_logging=disabled"]


@mark.parametrize("launcher_name, overrides", LAUNCHERS)
class TestSweepLauncher(LauncherTestSuite):
    pass


# the suite extends its `overrides` list in place: give it lists of its own
@mark.parametrize(
    "launcher_name, overrides", [(name, ["hydra.sweeper.max_batch_size=2", *extra]) for name, extra in LAUNCHERS]
)
class TestSweepLauncherBatched(BatchedSweeperTestSuite):
    pass


@mark.parametrize(
    "task_launcher_cfg, extra_flags",
    [
        ({}, ["-m", "hydra/launcher=local", "hydra.launcher.fast=true", *QUIET]),
        ({}, ["-m", "hydra/launcher=local", "hydra.launcher.fast=false", *QUIET]),
        ({}, ["-m", "hydra/launcher=modal", "hydra.launcher.modal.offline=true", *QUIET]),
    ],
)
class TestSweepLauncherIntegration(IntegrationTestSuite):
    pass


def test_the_fast_path_is_the_default_only_on_a_tested_hydra_and_omegaconf():
    """On the CI installs the fast path is on by default (a Hydra or OmegaConf upgrade that leaves TESTED_HYDRA or
    TESTED_OMEGACONF fails here: re-check the fast paths, then add the version); `fast=false` always takes the
    public path."""
    assert fast_paths_tested() and fast_paths(None) and fast_paths(True)
    assert not fast_paths(False)
    # the lean run_job reads OmegaConf's privates: an untested OmegaConf turns the default off as Hydra's does
    assert fast_paths_tested("1.3.2", "2.3.0")
    assert not fast_paths_tested("1.3.2", "2.4.0") and not fast_paths_tested("1.4.0", "2.3.0")
