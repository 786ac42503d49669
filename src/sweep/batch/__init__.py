"""Batching (`hydra.launcher.batch=R`): the jobs of a sweep that differ only in what their method can vectorise
(`vectorised` on the method class: seeds, learning rates, ...) are solved together in one worker task, and each
is still its own run. `key` says which jobs may share a batch; `run` solves a batch and makes each run's result.
"""
