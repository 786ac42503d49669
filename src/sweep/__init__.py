"""sweep: experiment sweeps for energy-efficient learning research (sparse parity and friends)."""

__version__ = "0.1.0"
