"""Sweep presets (sweeps/*.yaml): they compose as multiruns with their study's settings, and the ard_variants and
gpu_vs_cpu presets run end to end (shrunk by overrides) into a real store, where sweep.report.compare reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from sweep import job
from sweep.config.check import check_job
from sweep.paths import SWEEPS_DIR
from sweep.report import compare, study
from tests.conftest import compose, run_sweep
from tests.test_cli import no_modal_token  # noqa: F401 - the fixture

PRESETS = (
    "gpu_vs_cpu",
    "ard_variants",
    "tiled_w1",
    "scaling_n",
    "sign_vs_sgd",
    "curriculum_speedup",
    "lr_width",
    "weight_decay",
    "ff_vs_backprop",
    "torch_overhead",
    "smaller_models",
    "energy_proxies",
    "energy_joules",
    "proxy_study",
    "tune_sgd",
    "char_lm",
    "parity_challenge",
    "char_challenge",
)


def _compose(*overrides: str):
    return compose(*overrides, hydra_section=True)


def test_every_preset_file_is_listed():
    assert {p.stem for p in SWEEPS_DIR.glob("*.yaml")} == set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_composes_as_a_named_multirun(name):
    cfg = _compose(f"sweeps={name}")
    assert cfg.hydra.mode.name == "MULTIRUN"
    assert cfg.hydra.sweeper.params, name
    assert cfg.mlflow.experiment == name


def test_presets_carry_their_study_settings():
    g = _compose("sweeps=gpu_vs_cpu")
    assert dict(g.hydra.sweeper.params) == {"device": "cpu,cuda", "method": "gf2,sgd,km", "extra.repeat": "range(5)"}
    s = _compose("sweeps=gpu_vs_cpu", "method=sgd")
    assert (s.problem.n_bits, s.problem.k_sparse, s.problem.seed) == (20, 3, 42)
    assert (s.method.hidden, s.method.lr, s.method.wd, s.method.batch_size) == (200, 0.1, 0.01, 32)
    a = _compose("sweeps=ard_variants")
    assert (a.method.hidden, a.problem.n_train, a.tracker.name) == (500, 500, "ard")
    assert a.hydra.sweeper.params.variant == "standard,fused,perlayer"
    t = _compose("sweeps=tiled_w1")
    assert (t.tracker.name, t.tracker.scope, t.tracker.meter) == ("energy", "init_sample0", "none")
    assert t.hydra.sweeper.params["problem.seed"] == "42,43,44"
    assert t.hydra.sweeper.params["method.hidden"] == "1000,500"
    # each arm is one variant choice: the baseline is untiled, the others tile W1 (tiled_fused, tiled_w2 too)
    arms = {"baseline": ("standard", 0)}
    for prefix, variant in (("t", "tiled"), ("fused_t", "tiled_fused"), ("w2_t", "tiled_w2")):
        arms.update({f"{prefix}{T}": (variant, T) for T in (50, 100, 250, 500)})
    assert t.hydra.sweeper.params["+sweeps/tiled_w1_arm"] == ",".join(arms)
    for arm, (variant, size) in arms.items():
        c = _compose("sweeps=tiled_w1", f"+sweeps/tiled_w1_arm={arm}")
        assert (c.variant.name, c.variant.tile_size) == (variant, size)
    # combinable with further overrides
    o = _compose("sweeps=tiled_w1", "tracker.cache_size_floats=8192", "mlflow.experiment=mine")
    assert o.tracker.cache_size_floats == 8192 and o.mlflow.experiment == "mine"


def test_study_presets_arms_and_baselines():
    # each method at its own settings (seed 002: sign SGD needs a larger batch than SGD's 32 at k=5)
    for arm, want in {"sgd": ("sgd", 0.1, 32), "sign_sgd": ("sign_sgd", 0.01, 128)}.items():
        c = _compose("sweeps=sign_vs_sgd", f"+sweeps/sign_vs_sgd_arm={arm}")
        assert (c.method.name, c.method.lr, c.method.batch_size) == want
    # every torch_overhead arm is a valid job (numpy, torch options, cuda), all at float32 and fixed work
    arms = _compose("sweeps=torch_overhead").hydra.sweeper.params["+sweeps/torch_overhead_arm"].split(",")
    devices = {}
    for arm in arms:
        c = _compose("sweeps=torch_overhead", f"+sweeps/torch_overhead_arm={arm}")
        check_job(job.job_config(c))
        devices[arm] = (c.device.name, c.device.compile, c.device.compile_mode, c.device.fullgraph, c.device.autocast)
        assert c.device.dtype == "float32" and c.method.max_epochs == 3
    assert devices["numpy"][0] == "cpu" and devices["max_autotune"][1:3] == (True, "max-autotune")
    assert devices["fullgraph"][3] and devices["bf16"][4] == "bfloat16" and devices["cuda_fp16"][0] == "cuda"
    # a declared baseline names config keys (a misspelt one would silently drop the relative columns)
    for name in PRESETS:
        cfg = _compose(f"sweeps={name}")
        for key in study.study_settings(name).get("baseline", {}):
            assert OmegaConf.select(cfg, key) is not None, (name, key)


@pytest.mark.slow
def test_curriculum_speedup_prints_speedups_against_direct_training(store, tmp_path):
    # shrunk: one n (14 bits: stages 10 -> 14), one seed
    proc = run_sweep("sweeps=curriculum_speedup", "problem.n_bits=14", "problem.seed=42", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cmp, files = compare.compare("curriculum_speedup", out_dir=tmp_path / "cmp")
    assert cmp.keys == ["method.name"] and cmp.relative == ["epochs speed-up", "wall_clock_s speed-up"]
    sgd, cur = cmp.rows
    assert sgd.relative["epochs speed-up"] == "baseline"
    assert cur.relative["epochs speed-up"] == f"{sgd.stats['epochs'].mean / cur.stats['epochs'].mean:.3g}x"
    assert cur.relative["wall_clock_s speed-up"].endswith("x")
    assert [Path(f).name for f in files[2:]] == ["curriculum_speedup.png", "curriculum_speedup-curves.png"]


def test_energy_proxies_arms():
    e = _compose("sweeps=energy_proxies")
    assert (e.tracker.name, e.tracker.scope) == ("energy", "all_steps")
    assert e.hydra.sweeper.params["tracker.hierarchy"] == "cpu,gpu"
    assert e.hydra.sweeper.params["problem.seed"] == "42,43,44"
    arms = e.hydra.sweeper.params["+sweeps/energy_proxies_arm"].split(",")
    seen = set()
    for arm in arms:
        c = _compose("sweeps=energy_proxies", f"+sweeps/energy_proxies_arm={arm}")
        seen.add((c.method.name, c.variant.name, c.variant.tile_size, c.method.get("hidden")))
    methods = {m for m, *_ in seen}
    assert methods == {"sgd", "sign_sgd", "curriculum", "gf2", "km", "fourier", "smt", "forward_forward"} | {
        "bigram",
        "mlp_lm",
        "gpt",  # the character models (docs/chars.md)
    }
    sgd = {(v, t, h) for m, v, t, h in seen if m == "sgd"}
    assert sgd == {
        (v, t, h)
        for h in (100, 200)
        for v, t in (("standard", 0), ("fused", 0), ("perlayer", 0), ("tiled", 25), ("tiled", 50))
    }


def test_energy_joules_measures_each_arm_alone_on_the_gpu():
    """The proxies against measured Joules: every arm on cuda with the energy tracker on the GPU hierarchy, each
    solve traced whole, one job at a time (jobs sharing the GPU would share its counter)."""
    e = _compose("sweeps=energy_joules")
    assert (e.tracker.name, e.tracker.scope, e.tracker.hierarchy, e.tracker.meter) == (
        "energy",
        "all_steps",
        "gpu",
        "auto",
    )
    assert e.device.name == "cuda" and e.hydra.launcher.n_workers == 1
    assert list(e.compare.proxies.target) == ["energy_measured_j"]
    seen = set()
    for arm in e.hydra.sweeper.params["+sweeps/energy_joules_arm"].split(","):
        c = _compose("sweeps=energy_joules", f"+sweeps/energy_joules_arm={arm}")
        seen.add((c.method.name, c.variant.name, c.method.get("hidden")))
    assert {h for m, v, h in seen if m == "sgd" and v == "standard"} == {50, 200, 500, 1000, 2000}
    assert {v for m, v, h in seen if m == "sgd"} == {"standard", "fused", "perlayer", "tiled"}
    gpts = [_compose("sweeps=energy_joules", f"+sweeps/energy_joules_arm=gpt{w}") for w in (64, 128, 256)]
    assert [(c.problem.name, c.method.n_embd, c.device.name) for c in gpts] == [
        ("chars", w, "cuda") for w in (64, 128, 256)
    ]


@pytest.mark.slow
def test_energy_proxies_runs_and_ranks_the_proxies(store, tmp_path):
    # the preset shrunk to its cheap arms: a command-line sweep replaces the preset's
    proc = run_sweep(
        "sweeps=energy_proxies",
        "+sweeps/energy_proxies_arm=gf2,km",
        "problem.seed=42,43",
        "tracker.meter=none",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cmp, files = compare.compare("energy_proxies", out_dir=tmp_path / "cmp")
    for hierarchy in ("cpu", "gpu"):
        assert f"| {hierarchy} | energy_pj | 4 | Spearman |" in cmp.proxies
    assert {"proxies.md", "energy_proxies-proxies.png"} <= {Path(f).name for f in files}


@pytest.mark.slow
def test_ard_variants_runs_and_compares_to_the_published_table(store, tmp_path):
    # ARD is of one step's trace, whose shape does not depend on how long training ran: 2 epochs suffice
    proc = run_sweep("sweeps=ard_variants", "method.max_epochs=2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cmp, files = compare.compare("ard_variants", out_dir=tmp_path / "cmp")
    assert cmp.keys == ["variant.name"]
    ard = {r.key["variant.name"]: round(r.stats["ard"].mean) for r in cmp.rows}
    assert ard == {"standard": 17976, "fused": 17741, "perlayer": 17299}
    assert [r.key["variant.name"] for r in cmp.rows] == ["standard", "fused", "perlayer"]
    assert "| standard | 1/1 |" in cmp.markdown() and "17,976" in cmp.markdown()
    # seed 001's "ARD vs standard" column: 1.3% and 3.8% better
    assert [r.relative["ard vs base"] for r in cmp.rows] == ["baseline", "-1.3%", "-3.8%"]
    assert [Path(f).name for f in files[2:]] == ["ard_variants.png", "ard_variants-curves.png"]


@pytest.mark.parametrize(
    "preset, shrink, left_out",
    [
        ("gpu_vs_cpu", ["method=gf2,km", "extra.repeat=0"], "device=cuda"),
        (
            "torch_overhead",
            ["+sweeps/torch_overhead_arm=numpy,cuda_eager,cuda_fp16", "method.hidden=64", "extra.repeat=0"],
            "+sweeps/torch_overhead_arm=cuda_eager,cuda_fp16",
        ),
    ],
)
def test_the_gpu_presets_run_their_cpu_arms_without_a_token_and_name_what_was_left_out(
    store, tmp_path, no_modal_token, preset, shrink, left_out
):
    """On a machine without Modal's token the cuda arms cannot run (Modal needs it): the cpu arms run, and one
    line names the arms left out and how to run them (a token, then the same command)."""
    p = run_sweep(f"sweeps={preset}", *shrink, f"hydra.sweep.dir={tmp_path / 'm'}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    said = [ln for ln in p.stdout.splitlines() if ln.startswith("sweep: leaving out")]
    assert len(said) == 1 and f"job(s), {left_out}: Modal has no API token here" in said[0], p.stdout
    assert "modal token new" in said[0] and "run this command again" in said[0]
    assert "left out" in [ln for ln in p.stdout.splitlines() if " job(s) finished" in ln][0]
    from mlflow import MlflowClient

    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name(preset).experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert children and all(r.info.status == "FINISHED" for r in children)
    assert {r.data.params["device.name"] for r in children} == {"cpu"}  # the cuda arms: none
