"""Preflight: every refusal before a job, in one place. Each path calls it before any job starts, so a bad input
is refused alike however the jobs are launched (one `sweep:` line on stderr; exit 2 for bad input, 1 for what is
missing but is not input, such as a store that cannot be written):

- the command line, before Hydra composes anything (`command.check_command`, from `python -m sweep`'s main):
  `-m` anywhere, unknown presets, `+key=value` that no job reads;
- the store the runs go to (`store.check_store`), at a single run's start and a multirun's start, whatever
  launcher runs it: the experiment's name, the server's answer, a store that can be written;
- each job (`jobs.check_planned`): `sweep.config.check.check_job`, the one check of a job's config, named as the
  sweep names the job; called by the project's launcher's plan, by the Hydra callback for another launcher's
  grid (`jobs.check_grid`) and by a single run (`jobs.check_single_run`).

A check raises `Refusal`; the caller that owns the exit says it (`Refusal.exit`, or the launcher's `Refused`).
"""

from sweep.preflight.refusal import Refusal

__all__ = ["Refusal"]
