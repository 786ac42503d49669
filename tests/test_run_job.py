"""The worker's cheaper run_job pieces say the same as Hydra's: the .hydra YAML, the config artifact, and the
JobReturn the launcher rebuilds instead of shipping configs back."""

from __future__ import annotations

import yaml
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from hydra_plugins.sweep_launcher._jobs import IsolatedFailure, ReturnedJob
from hydra_plugins.sweep_launcher._run_job import to_yaml
from sweep.job import config_yaml
from tests.conftest import compose


def test_hydra_yaml_files_say_what_omegaconf_writes():
    cfg = compose("method=sgd", "variant=tiled", "variant.tile_size=50", hydra_section=True)
    hydra_only = OmegaConf.masked_copy(cfg, "hydra")
    task = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    for c in (hydra_only, task, cfg.hydra.overrides.task):
        assert yaml.safe_load(to_yaml(c)) == yaml.safe_load(OmegaConf.to_yaml(c))
    # the help template is a long string with escapes and newlines: it must survive line folding
    assert yaml.safe_load(to_yaml(hydra_only))["hydra"]["help"]["template"] == cfg.hydra.help.template


def test_config_artifact_round_trips():
    cfg = compose("method=km", "problem.seed=7")
    text = config_yaml(cfg)
    assert OmegaConf.to_container(OmegaConf.create(text)) == OmegaConf.to_container(cfg)
    assert yaml.safe_load(text)["problem"]["seed"] == 7


def test_returned_job_rebuilds_the_configs_it_did_not_carry():
    cfg = compose("method=gf2", "problem.seed=3", hydra_section=True)
    slim = JobReturn(
        overrides=["problem.seed=3"], working_dir="/w", task_name="sweep", status=JobStatus.COMPLETED, _return_value=42
    )
    ret = ReturnedJob.of(slim, cfg, "/out/3")
    assert ret.return_value == 42 and ret.overrides == ["problem.seed=3"] and ret.working_dir == "/w"
    assert ret._source is not None  # nothing built until asked
    assert "hydra" not in ret.cfg and ret.cfg.problem.seed == 3
    assert ret.hydra_cfg.hydra.runtime.output_dir == "/out/3"
    assert OmegaConf.is_readonly(ret.hydra_cfg.hydra)
    assert OmegaConf.select(cfg, "hydra.runtime.output_dir", default=None) is None  # the launcher's copy is untouched

    failed = ReturnedJob.of(JobReturn(status=JobStatus.FAILED, _return_value=ValueError("x")), cfg, None)
    iso = IsolatedFailure.__new__(IsolatedFailure)
    iso.__dict__.update(failed.__dict__)
    assert isinstance(iso.return_value, ValueError)  # does not raise: the sweep goes on
    assert iso.cfg.problem.seed == 3


def test_build_makes_what_instantiate_makes():
    from hydra.utils import instantiate

    from sweep.job import build

    cfg = compose("method=sgd", "variant=tiled", "variant.tile_size=50", "tracker=cache", "problem.seed=9")
    for group in ("problem", "method", "variant", "tracker"):
        assert build(cfg[group]) == instantiate(cfg[group]), group
    # anything richer than flat fields still goes through Hydra
    assert build(OmegaConf.create({"_target_": "builtins.dict", "_convert_": "all", "a": 1})) == {"a": 1}
    assert build(OmegaConf.create({"_target_": "math.hypot", "_args_": [3, 4]})) == 5.0
