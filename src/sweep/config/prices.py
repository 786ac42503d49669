"""What a run cost in US dollars: the device's hourly price times the seconds it was busy."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf

from sweep.paths import CONF_DIR


def cost_usd(seconds: float, price_per_hour: float) -> float:
    """cost = seconds x price_per_hour / 3600: a run's `cost_usd` from its solve's wall-clock, its
    `task_cost_usd` from the seconds its task was billed: CPU seconds here at the device config's price_per_hour
    (cuda: the GPU's rate from conf/prices), container seconds on Modal at Modal's rate (a CPU core's without a
    GPU)."""
    return float(seconds) * float(price_per_hour) / 3600.0


def price_table() -> Path:

    return Path(CONF_DIR) / "prices" / "modal_gpu.yaml"


class PriceTableError(ValueError):
    """A price table that cannot be read: what is wrong with it, in words."""


@lru_cache(maxsize=4)
def load_prices(path: Optional[str] = None) -> dict[str, float]:
    """USD per hour by Modal gpu type (upper case), from conf/prices/modal_gpu.yaml or `path` (a user's table:
    PriceTableError where it is no readable file of that form; it was OmegaConf's traceback, or a FIFO's wait)."""
    source = Path(path or price_table())
    if not source.is_file():
        raise PriceTableError(f"{'not a regular file' if source.exists() else 'no such file'}")
    try:
        table = OmegaConf.to_container(OmegaConf.load(source).usd_per_hour)
        return {str(k).upper(): float(v) for k, v in table.items()}
    except Exception as e:  # noqa: BLE001 - unreadable, not YAML, no usd_per_hour, a price that is no number
        raise PriceTableError(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None


def gpu_price_per_hour(gpu: Optional[str], path: Optional[str] = None) -> float:
    """USD per hour for a Modal gpu spec: "L4", "H100!", "A100-80GB:2" (2 GPUs); None: one CPU core."""
    if not gpu:
        return load_prices(path)["CPU"]
    kind, _, count = str(gpu).partition(":")
    kind = kind.rstrip("!").upper()
    prices = load_prices(path)
    if kind not in prices:
        raise KeyError(
            f"no Modal price for gpu={gpu!r}: add it to {path or price_table()} (known: {', '.join(sorted(prices))})"
        )
    return prices[kind] * (int(count) if count else 1)


def device_price_per_hour(device: Any) -> float:
    """USD per hour of a job's device: device.price_per_hour, or where that is null (device=cuda), the Modal
    rate of device.gpu from the price table: a GPU of this machine is priced as Modal's of its type."""
    get = device.get if isinstance(device, Mapping) else lambda key: getattr(device, key, None)  # a config or dict
    price = get("price_per_hour")
    return float(price) if price is not None else gpu_price_per_hour(get("gpu"))
