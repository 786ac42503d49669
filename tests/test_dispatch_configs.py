"""What the launcher composes per job, and what a local worker makes of it.

A worker makes each job's config from its template and the job's values (`_template`): the config, the task's copy
and the overrides it makes equal what the launcher composes for the job (`_jobs.compose`), the sweep's resolver
cache included (`now`: one sweep dir for every job), for jobs of several templates in turn. The launcher composes a
job for the hooks only if they read its config."""

from __future__ import annotations

import pickle
import time

import pytest

from tests.conftest import ROOT


@pytest.mark.usefixtures("hydra_restore_singletons")  # initialize_config_dir sets Hydra's global version base
def test_a_job_made_from_its_template_is_the_job_the_launcher_composes():
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf, open_dict

    from hydra_plugins.sweep_launcher._compose import FastComposer
    from hydra_plugins.sweep_launcher._core import Spec
    from hydra_plugins.sweep_launcher._template import Template
    from sweep.config.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3", job_name="t"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", ["method=gf2,sgd", "problem.seed=1,2"], RunMode.MULTIRUN)
        sweep_dir = str(master.hydra.sweep.dir)  # as the launcher resolves it first: `now` is in the cache
        time.sleep(1.1)  # a worker that resolved `now` afresh would name another directory
        fast = FastComposer(loader)
        held: dict[int, Template] = {}  # the worker's templates, each made from what the launcher sends once
        jobs = [
            ["method=gf2", "problem.seed=1"],
            ["problem.seed=3", "method=sgd", "method.lr=0.5", "device.dtype=float32"],
            ["method=gf2", "problem.seed=5", "problem.n_bits=30"],
            ["method=sgd", "problem.seed=4"],  # the previous job's values are not this one's
            ["method=gf2", "problem.seed=6", "run_name='a: b, #c \\'q\\''"],
        ]
        for num, overrides in enumerate(jobs):
            want, template = fast.take(master, overrides)
            with open_dict(want):
                want.hydra.job.id, want.hydra.job.num = f"{want.hydra.job.name}_{num}", num
            assert template is not None
            if template not in held:
                sent = pickle.dumps((fast.hydra_doc(template), *fast.pickled(template)))
                held[template] = Template(*pickle.loads(sent))
            given, values = fast.given(overrides)
            spec = pickle.loads(pickle.dumps(Spec(template, given, values, num, OmegaConf.get_cache(master))))
            made = held[template].made(spec)
            cfg, task = made.config(), made.task()
            assert OmegaConf.to_container(cfg) == OmegaConf.to_container(want), overrides
            assert (
                str(cfg.hydra.sweep.dir) == sweep_dir
                and cfg.hydra.job.override_dirname == want.hydra.job.override_dirname
            )
            assert "hydra" not in task
            want_task = OmegaConf.masked_copy(want, [k for k in want if k != "hydra"])
            assert OmegaConf.to_container(task, resolve=True) == OmegaConf.to_container(want_task, resolve=True)
            assert OmegaConf.is_struct(task) and made.overrides() == list(want.hydra.overrides.task) == overrides
        assert len(held) == 2  # one per group selection: each sent to the worker once


def test_a_jobs_config_is_composed_for_the_hooks_only_when_read():
    from hydra_plugins.sweep_launcher._jobs import Job

    made: list[int] = []
    job = Job(idx=3, overrides=["problem.seed=3"])
    assert job.cfg is None  # nothing to compose it with: no config
    job.again = lambda: made.append(1) or {"composed": True}
    assert made == [] and job.label() == "#3 problem.seed=3" and job.data == {}
    assert job.cfg == {"composed": True} and job.cfg == {"composed": True} and made == [1]  # once, when read
    job.again, job.cfg = None, None
    assert job.cfg is None
    assert Job(idx=1, overrides=[], cfg="x").cfg == "x"
