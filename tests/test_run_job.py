"""The worker's cheaper run_job pieces say the same as Hydra's: the .hydra YAML, the config artifact, and the
JobReturn the launcher rebuilds instead of shipping configs back."""

from __future__ import annotations

import yaml
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from hydra_plugins.sweep_launcher._fast.run_job import to_yaml
from hydra_plugins.sweep_launcher._jobs import IsolatedFailure, ReturnedJob
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
    ret = ReturnedJob.of(slim, lambda: cfg, "/out/3")
    assert ret.return_value == 42 and ret.overrides == ["problem.seed=3"] and ret.working_dir == "/w"
    assert ret._source is not None  # nothing built until asked
    assert "hydra" not in ret.cfg and ret.cfg.problem.seed == 3
    assert ret.hydra_cfg.hydra.runtime.output_dir == "/out/3"
    assert OmegaConf.is_readonly(ret.hydra_cfg.hydra)
    assert OmegaConf.select(cfg, "hydra.runtime.output_dir", default=None) is None  # the launcher's copy is untouched

    failed = ReturnedJob.of(JobReturn(status=JobStatus.FAILED, _return_value=ValueError("x")), lambda: cfg, None)
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


def test_memoised_interpolation_parser_resolves_each_config_afresh():
    import omegaconf.base
    import omegaconf.grammar_parser

    from hydra_plugins.sweep_launcher._fast.parse_cache import install

    install()
    install()  # idempotent: one cache, not a cache of a cache
    parse = omegaconf.grammar_parser.parse
    assert parse is omegaconf.base.parse and parse.__wrapped__.__module__ == "omegaconf.grammar_parser"
    before = parse.cache_info()
    cfg = OmegaConf.create({"seed": 1, "dir": "multirun/${seed}/${name}", "name": "a"})
    seen = []
    for seed, name in [(1, "a"), (2, "b"), (3, "a")]:
        cfg.seed, cfg.name = seed, name
        seen.append(cfg.dir)
    other = OmegaConf.create({"seed": "x", "name": "y", "dir": "multirun/${seed}/${name}"})
    assert seen + [other.dir] == ["multirun/1/a", "multirun/2/b", "multirun/3/a", "multirun/x/y"]
    assert parse.cache_info().hits >= before.hits + 3  # one parse of the string, reused


def test_a_jobs_log_reuses_the_handlers_and_writes_its_own_file(tmp_path):
    """Jobs one after the other in a worker: the handlers the last job's set-up made stay, pointed at this job's
    file, unless its log config differs in more than the file names or the task changed logging meanwhile."""
    import logging

    from hydra_plugins.sweep_launcher._fast import run_job as _run_job

    def log_config(job: int, level: str = "INFO") -> OmegaConf:
        return OmegaConf.create(
            {
                "version": 1,
                "formatters": {"simple": {"format": "%(message)s"}},
                "handlers": {
                    "file": {
                        "class": "logging.FileHandler",
                        "formatter": "simple",
                        "filename": f"{tmp_path}/{job}/job.log",
                    }
                },
                "root": {"level": level, "handlers": ["file"]},
                "disable_existing_loggers": False,
            }
        )

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        for job in range(5):
            (tmp_path / str(job)).mkdir()
        _run_job.configure_job_log(log_config(0), False)  # nothing set up before: in full
        first = root.handlers[0]
        logging.getLogger("x").info("zero")
        _run_job.configure_job_log(log_config(1), False)
        assert root.handlers == [first]  # the same handler, pointed at job 1's file
        logging.getLogger("x").info("one")
        root.setLevel(logging.WARNING)  # the task changed logging: the next job's set-up is Hydra's whole one
        _run_job.configure_job_log(log_config(2), False)
        assert root.handlers[0] is not first and root.level == logging.INFO
        second = root.handlers[0]
        logging.getLogger("x").info("two")
        _run_job.configure_job_log(log_config(3, level="DEBUG"), False)  # another config: in full
        assert root.handlers[0] is not second and root.level == logging.DEBUG
        third = root.handlers[0]
        _run_job.configure_job_log(log_config(4, level="DEBUG"), False)
        assert root.handlers == [third]
        for h in root.handlers:
            h.flush()
        logs = [(tmp_path / str(j) / "job.log").read_text() for j in range(5)]
        assert logs == ["zero\n", "one\n", "two\n", "", ""]
    finally:
        for h in root.handlers:
            h.close()
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
        _run_job._job_log = _run_job._job_log_state = _run_job._job_log_raw = None


def test_a_job_log_config_resolves_as_omegaconf_resolves_it():
    """The log config of jobs sharing one hydra section: its interpolations resolved afresh for each job."""
    from hydra_plugins.sweep_launcher._fast.run_job import _resolved

    cfg = OmegaConf.create(
        {
            "out": "/o/1",
            "name": "j",
            "log": {
                "handlers": {"file": {"filename": "${out}/${name}.log", "class": "logging.FileHandler"}},
                "loggers": {"a.b": {"level": "${level}", "handlers": ["file"]}},
                "root": {"handlers": ["file"], "level": "INFO"},
            },
            "level": "DEBUG",
        }
    )
    for out in ("/o/1", "/o/2"):
        cfg.out = out
        assert _resolved(cfg.log) == OmegaConf.to_container(cfg.log, resolve=True)
        assert _resolved(cfg.log)["handlers"]["file"]["filename"] == f"{out}/j.log"
