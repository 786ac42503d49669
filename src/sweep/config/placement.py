"""Where a job runs, from its device config: numpy or torch on cpu -> this machine's workers, torch on cuda
-> Modal (unless device.local_gpu). The launcher asks through its hooks; the price check reads it."""

from __future__ import annotations

from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf


def placement(cfg: "DictConfig | dict[str, Any]") -> tuple[str, Optional[str]]:
    """(local | modal, Modal gpu or None). `cfg`: the composed config, or its keys resolved as plain data."""
    device = cfg.get("device") if isinstance(cfg, dict) else OmegaConf.select(cfg, "device")
    if not isinstance(device, (DictConfig, dict)):
        return "local", None
    cuda = device.get("backend") == "torch" and str(device.get("torch_device", "cpu")).startswith("cuda")
    gpu = device.get("gpu")
    return ("modal" if cuda and not device.get("local_gpu", False) else "local"), (str(gpu) if gpu else None)
