"""The study's design as data: the GPU's configurations are sweeps/proxy_study.yaml's swept arms and repeats (one
fact, read from the preset), the CPU arm's are its cpu_* arms (small twins) at the same repeats; the CPU ground
truth's are the sparse-parity variants at widths on both sides of the simulated caches (GROUND_TRUTH)."""

from __future__ import annotations

from itertools import product
from typing import Any

from omegaconf import OmegaConf

from sweep.paths import CONF_DIR, SWEEPS_DIR

PRESET = "proxy_study"
ARMS = SWEEPS_DIR / f"{PRESET}_arm"
CPU_PREFIX = "cpu_"

# the CPU ground truth (sweep.proxy_study.ground_truth): W1 is hidden x 20 floats, 8 KB to 640 KB in float32, on
# both sides of the simulated 32 KiB D1 and inside the 1 MiB LL; one epoch of 1,000 samples. Seeds: two at the
# smallest width (its noise: seed and layout), one elsewhere (1,000: ~45 s a run, 8,000: ~2 min under the simulator;
# the CPU budget was ~15 minutes)
GROUND_TRUTH_VARIANTS = ("standard", "fused", "perlayer", "tiled")
GROUND_TRUTH_SEEDS = {100: (42, 43), 1000: (42,), 8000: (42,)}


def _values(spec: str) -> list[str]:
    spec = str(spec).strip()
    if spec.startswith("range(") and spec.endswith(")"):
        return [str(i) for i in range(*(int(a) for a in spec[6:-1].split(",")))]
    return [v.strip() for v in spec.split(",")]


def gpu_design() -> list[tuple[str, int]]:
    """(arm, repeat) of the preset's sweep, every arm once before any repeat (the slices' order: the first slices
    already span the design)."""
    params = OmegaConf.load(SWEEPS_DIR / f"{PRESET}.yaml").hydra.sweeper.params
    arms = _values(params[f"+sweeps/{PRESET}_arm"])
    repeats = [int(r) for r in _values(params["extra.repeat"])]
    return [(a, r) for r, a in product(repeats, arms)]


def cpu_design() -> list[tuple[str, int]]:
    """The CPU arm: every cpu_* twin, at the preset's repeats."""
    repeats = sorted({r for _, r in gpu_design()})
    arms = sorted(p.stem for p in ARMS.glob(f"{CPU_PREFIX}*.yaml"))
    return [(a, r) for r, a in product(repeats, arms)]


def overrides(arm: str, repeat: int, on_gpu: bool) -> list[str]:
    """The command-line overrides of one run: the preset, its arm, the repeat, and where it runs (the CPU arm: torch
    on this CPU, priced on the CPU hierarchy)."""
    where = ["device.local_gpu=true"] if on_gpu else ["device=torch_cpu", "tracker.hierarchy=cpu"]
    return [f"sweeps={PRESET}", f"+sweeps/{PRESET}_arm={arm}", f"extra.repeat={repeat}", *where]


def ground_truth() -> list[tuple[str, int, list[str]]]:
    """(configuration, seed, overrides) of the CPU ground truth: numpy in float32 on one BLAS thread, each solve's
    every step traced for the proxies (tracker=energy on the cpu hierarchy, no meter); every configuration once
    before any is repeated."""
    out = []
    seeds = sorted({s for ss in GROUND_TRUTH_SEEDS.values() for s in ss})
    for seed, variant, hidden in product(seeds, GROUND_TRUTH_VARIANTS, GROUND_TRUTH_SEEDS):
        if seed not in GROUND_TRUTH_SEEDS[hidden]:
            continue
        tile = [f"variant.tile_size={hidden // 4}"] if variant == "tiled" else []
        out.append(
            (
                f"{variant} h{hidden}",
                seed,
                [
                    "method=sgd",
                    f"variant={variant}",
                    *tile,
                    f"method.hidden={hidden}",
                    "method.max_epochs=1",
                    f"problem.seed={seed}",
                    "device.dtype=float32",
                    "device.threads=1",
                    "tracker=energy",
                    "tracker.hierarchy=cpu",
                    "tracker.scope=all_steps",
                    "tracker.meter=none",
                ],
            )
        )
    return out


def compose(args: list[str]) -> Any:
    """The job config `python -m sweep ARGS` would run (Hydra's composition; its process-global version put back)."""
    from hydra import compose as hydra_compose  # noqa: PLC0415 - Hydra's composition: only where a command asks
    from hydra import initialize_config_dir  # noqa: PLC0415
    from hydra.version import VersionBase  # noqa: PLC0415

    from sweep.config.schema import register_configs  # noqa: PLC0415

    register_configs()
    saved = VersionBase.instance().getbase()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return hydra_compose("config", overrides=list(args))
    finally:
        VersionBase.instance().version_base = saved
