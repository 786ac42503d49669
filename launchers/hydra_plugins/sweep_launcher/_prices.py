"""Modal GPU prices from the table in conf/prices/modal_gpu.yaml (USD per GPU-hour)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf


def default_table() -> Path:
    from sweep.paths import CONF_DIR

    return Path(CONF_DIR) / "prices" / "modal_gpu.yaml"


@lru_cache(maxsize=4)
def load_prices(path: Optional[str] = None) -> dict[str, float]:
    table = OmegaConf.to_container(OmegaConf.load(path or default_table()).usd_per_hour)
    return {str(k).upper(): float(v) for k, v in table.items()}


def gpu_price_per_hour(gpu: Optional[str], path: Optional[str] = None) -> float:
    """USD per hour for a Modal gpu spec: "L4", "H100!", "A100-80GB:2" (2 GPUs); None: one CPU core."""
    if not gpu:
        return load_prices(path)["CPU"]
    kind, _, count = str(gpu).partition(":")
    kind = kind.rstrip("!").upper()
    prices = load_prices(path)
    if kind not in prices:
        raise KeyError(f"no Modal price for gpu={gpu!r}: add it to {path or default_table()} "
                       f"(known: {', '.join(sorted(prices))})")
    return prices[kind] * (int(count) if count else 1)
