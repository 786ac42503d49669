"""What a run cost in US dollars: the device's hourly price times the seconds it was busy."""
from __future__ import annotations


def cost_usd(seconds: float, price_per_hour: float) -> float:
    """cost = seconds x price_per_hour / 3600.

    Local runs pass the solve's wall-clock (or CPU seconds, for the local launcher) and the device config's
    price_per_hour; Modal runs pass billed seconds and the GPU's rate from conf/prices.
    """
    return float(seconds) * float(price_per_hour) / 3600.0
