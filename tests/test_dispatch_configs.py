"""What the launcher composes per job, and what a local worker makes of it.

A worker makes each job's config from its template and the job's values (`_template`): the config, the task's copy
and the overrides it makes equal what the launcher composes for the job (`_jobs.compose`), the sweep's resolver
cache included (`now`: one sweep dir for every job), for jobs of several templates in turn. The launcher composes a
job for the hooks only if they read its config."""

from __future__ import annotations

import pickle
import time

import pytest

from tests.conftest import fast_composer


@pytest.mark.usefixtures("hydra_restore_singletons")  # initialize_config_dir sets Hydra's global version base
def test_a_job_made_from_its_template_is_the_job_the_launcher_composes():
    from omegaconf import OmegaConf, open_dict

    from hydra_plugins.sweep_launcher._core import Spec
    from hydra_plugins.sweep_launcher._fast.template import Template

    with fast_composer("method=gf2,sgd", "problem.seed=1,2") as (_, master, fast):
        sweep_dir = str(master.hydra.sweep.dir)  # as the launcher resolves it first: `now` is in the cache
        time.sleep(1.1)  # a worker that resolved `now` afresh would name another directory
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
    from hydra_plugins.sweep_launcher._dispatch import Dispatcher
    from hydra_plugins.sweep_launcher._jobs import Job

    made: list[int] = []

    class Composes:  # what the dispatcher composes a job with, counted
        def _in_turn(self, job: Job) -> dict:
            made.append(job.idx)
            return {"composed": job.idx}

    job = Job(idx=3, overrides=["problem.seed=3"])
    assert job.cfg is None  # nothing to compose it with: no config
    with Dispatcher._for_hooks(Composes(), job):  # an outcome handed over (_handle)
        with Dispatcher._for_hooks(Composes(), job):  # ... to the hooks (_tell), which read nothing
            assert job.label() == "#3 problem.seed=3" and job.data == {}
    assert made == [] and job.cfg is None
    with Dispatcher._for_hooks(Composes(), job):
        with Dispatcher._for_hooks(Composes(), job):
            assert job.cfg == {"composed": 3} and job.cfg == {"composed": 3}
        assert job.cfg == {"composed": 3}
    assert made == [3] and job.cfg is None and job.again is None  # composed once, when read; then dropped
    assert Job(idx=1, overrides=[], cfg="x").cfg == "x"
