"""The error a config that cannot run raises: its own module, so the modules that check values (the checks,
backend, the methods, the energy hierarchy) import it without importing one another."""

from __future__ import annotations


class ConfigError(ValueError):
    """A composed config that cannot run; the message names the field and the allowed values."""


class NoDeviceHere(ConfigError):
    """A job that runs on this machine needs a device it lacks (a CUDA GPU): the preflight adds what runs here."""
