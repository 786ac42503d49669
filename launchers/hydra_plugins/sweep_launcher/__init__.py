"""Hydra launcher plugin for sweep: local worker processes and Modal GPUs; see launcher.py."""
