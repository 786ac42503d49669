"""The check pass over a grid reads each job as plain data, made once per template: equal to the full composition.

Every job of a sweep is checked before any starts; at 50,000 jobs that leaves ~100 µs a job. Jobs that differ only
in plain values share a shape (`_compose.Shape`): their values are set in place on one working config, and their
resolved config is the template's, resolved once, with the values put in — except for the top-level keys an
interpolation of which reads a varied value (or is a resolver's), which are resolved per job. These tests hold that
to the full path (Hydra's composition, then `sweep.job.job_config`): the same config, hash, batch key, placement
and check verdict, over grids with interpolations of every kind; and the sweeper's validation and the grammar
shortcut to Hydra's own. Time to the first job: benchmarks/bench_grid.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Optional

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import ROOT, run_sweep

# appended to a copy of conf/config.yaml: (yaml, the top-level keys whose interpolations read a varied value)
CASES = {
    "none": ("", set()),
    "reads a fixed key": ("extra:\n  width: w${problem.n_bits}\n", set()),
    "reads the varied seed": ("extra:\n  tag: s${problem.seed}\n", {"extra"}),
    "a job group reads a varied key": ("problem:\n  n_test: ${problem.n_train}\n", {"problem"}),
    "relative, up a level": ("extra:\n  seed: ${..problem.seed}\n", {"extra"}),
    "through another interpolation": ("extra:\n  a: ${problem.seed}\nrun_name: r${extra.a}\n", {"extra", "run_name"}),
    "reads a dict holding a varied key": ("extra:\n  p: ${problem}\n", {"extra"}),
    "a resolver": ("extra:\n  home: ${oc.env:HOME}\n", {"extra"}),
    "reads the job's hydra keys": ("run_name: ${hydra:job.override_dirname}\n", {"run_name"}),
}
GRID = [
    [f"method={m}", "tracker=none", f"problem.seed={s}", f"problem.n_train={n}", f"problem.k_sparse={k}"]
    for m in ("gf2", "sgd")
    for s in (7, 4294967296)  # the last: out of numpy's range (check_job refuses it)
    for n in (200, 300)
    for k in (3, 25)  # 25 > n_bits: refused
]


def conf_with(tmp_path: Path, extra_yaml: str) -> Path:
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    with (conf / "config.yaml").open("a") as f:
        f.write("\n" + extra_yaml)
    return conf


def verdict(config: Any) -> Optional[str]:
    from sweep.config.check import check_job
    from sweep.errors import ConfigError

    try:
        check_job(config, available=lambda: 1e12)
    except ConfigError as e:
        return str(e)
    return None


@pytest.mark.usefixtures("hydra_restore_singletons")  # initialize_config_dir sets Hydra's global version base
@pytest.mark.parametrize("case", list(CASES))
def test_the_check_pass_reads_each_job_as_the_full_composition_would(tmp_path, case):
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf, open_dict

    from hydra_plugins.sweep_launcher._fast.compose import FastComposer
    from hydra_plugins.sweep_launcher.hooks import PlannedJob
    from sweep.batch.key import batch_key
    from sweep.config.placement import placement
    from sweep.config.schema import register_configs
    from sweep.job import job_config
    from sweep.launch.hooks import planned_config
    from sweep.record.recorder import config_hash

    extra_yaml, read_varied = CASES[case]
    register_configs()
    with initialize_config_dir(config_dir=str(conf_with(tmp_path, extra_yaml)), version_base="1.3", job_name="t"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", ["method=gf2,sgd", "problem.seed=0,7"], RunMode.MULTIRUN)
        fast = FastComposer(loader)
        verdicts = set()
        for idx, overrides in enumerate(GRID):
            want = loader.load_sweep_config(master, overrides)  # Hydra's own composition
            with open_dict(want):
                want.hydra.job.id, want.hydra.job.num = f"t_{idx}", idx
            taken = fast.take_planned(master, overrides, f"t_{idx}", idx)
            assert taken is not None, overrides
            cfg, _, resolved = taken
            assert OmegaConf.to_container(cfg) == OmegaConf.to_container(want)  # the job's, hydra keys included
            assert resolved is not None and set(resolved) == {str(k) for k in want if k != "hydra"} - read_varied
            job = PlannedJob(idx=idx, overrides=overrides, cfg=cfg, resolved=resolved)
            got, full = planned_config(job), job_config(want)
            assert got == full, overrides
            assert config_hash(got) == config_hash(full)
            assert batch_key(got) == batch_key(full)
            assert placement(resolved) == placement(want)
            assert verdict(got) == verdict(full)
            verdicts.add(verdict(full))
        assert len(verdicts) == 3  # accepted, the seed refused, k_sparse refused: each verdict was compared


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_a_value_the_config_refuses_takes_hydras_path_and_error(tmp_path):
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import ConfigCompositionException
    from hydra.types import RunMode

    from hydra_plugins.sweep_launcher._fast.compose import FastComposer
    from sweep.config.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3", job_name="t"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", ["problem.seed=0,1"], RunMode.MULTIRUN)
        fast = FastComposer(loader)
        for i in range(300):  # the sweeper's validation: each job's values set on the template's working copy
            task = fast.load_sweep_config(master, ["method=gf2", f"problem.seed={i}", "method.max_rows=5"])
            assert task.problem.seed == i and task.method.max_rows == 5
            assert fast.take_planned(master, ["method=gf2", f"problem.seed={i}"], f"t_{i}", i)[0].problem.seed == i
        for bad in (["method=gf2", "problem.seed=abc", "method.max_rows=5"], ["method=gf2", "problem.nope=1"]):
            with pytest.raises(ConfigCompositionException) as hydra_error:
                loader.load_sweep_config(master, bad)
            with pytest.raises(ConfigCompositionException) as fast_error:
                fast.load_sweep_config(master, bad)
            assert str(fast_error.value) == str(hydra_error.value)
        # the check pass: a value its node refuses is not taken in place (the launcher composes it, Hydra's error)
        assert fast.take_planned(master, ["method=gf2", "problem.seed=abc"], "t_x", 9) is None
        assert fast.take_planned(master, ["method=gf2", "problem.seed=5"], "t_y", 10)[0].problem.seed == 5


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_a_number_line_parses_as_hydras_grammar_parses_it():
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.sweep_launcher._fast.compose import FastComposer
    from sweep.config.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3", job_name="t"):
        loader = GlobalHydra.instance().config_loader()
        fast, hydra = FastComposer(loader), OverridesParser.create(config_loader=loader)
        fast._parse("problem.seed=1"), fast._parse("method.lr=0.5")  # one line per key through the grammar
        for line in (
            *("problem.seed=7", "problem.seed=-3", "problem.seed=0", "problem.seed=-0", "problem.seed=123456789"),
            *("method.lr=0.25", "method.lr=-1.5", "method.lr=10.0", "problem.seed=0.5", "method.lr=3"),
            *("problem.seed=007", "problem.seed=1_000", "method.lr=1e-3", "method.lr=.5", "problem.seed=+4"),
        ):
            got, want = fast._parse(line)[0], hydra.parse_overrides([line])[0]
            assert (got.type, got.key_or_group, got.value_type, got.package, got.input_line) == (
                want.type,
                want.key_or_group,
                want.value_type,
                want.package,
                want.input_line,
            ), line
            assert (type(got.value()), got.value()) == (type(want.value()), want.value()), line


def test_a_bad_seed_at_the_40000th_job_is_refused_before_any_job(tmp_path):
    # 40,000 seeds, only the last out of range (seed + 1 must fit numpy's RandomState): found by the check pass,
    # before the first job or the store
    store = tmp_path / "mlflow.db"
    p = run_sweep(
        "-m",
        "method=gf2",
        "tracker=none",
        "problem.seed=range(4294927296,4294967296)",
        "hydra.launcher.n_workers=1",
        cwd=tmp_path,
        env={"MLFLOW_TRACKING_URI": f"sqlite:///{store}"},
        timeout=600,
    )
    assert p.returncode == 2, p.stderr[-2000:]
    assert (
        p.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "sweep: config error in job seed=4294967295: problem.seed=4294967295 is not allowed: expected an "
            "integer with 0 <= seed <= 4294967294"
        )
    )
    assert "[FINISHED]" not in p.stdout
    assert not store.exists()  # nothing recorded: the store is opened only once every job passed
    assert not (tmp_path / "multirun").exists()  # nor Hydra's multirun.yaml and its folders (a prober found them)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    from sweep.record.recorder import Recorder

    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    Recorder(uri, "warmup")
    return uri


def test_hashes_from_plain_data_resume_under_hydras_full_path(store, tmp_path):
    # recorded through the check pass's plain data (an interpolation reading the seed, one reading a fixed key),
    # then run again on Hydra's public path: the same hashes, so every job is found done
    args = [
        "-m",
        "method=gf2",
        "tracker=none",
        "problem.seed=1,2",
        "+extra.tag=s${problem.seed}",
        "+extra.width=${problem.n_bits}",
        "mlflow.experiment=plain_hashes",
        "hydra.launcher.n_workers=1",
    ]
    env = {"MLFLOW_TRACKING_URI": store}
    first = run_sweep(*args, cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.count("[FINISHED]") == 2
    again = run_sweep(*args, "hydra.launcher.fast=false", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "skipping 2 job(s) already done" in again.stdout
    c = MlflowClient(store)
    runs = c.search_runs([c.get_experiment_by_name("plain_hashes").experiment_id])
    assert sorted(r.data.params.get("extra.tag") for r in runs if r.data.tags.get("sweep.parent") != "true") == [
        "s1",
        "s2",
    ]
