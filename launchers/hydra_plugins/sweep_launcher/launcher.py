"""A Hydra launcher: warm local worker processes and Modal containers, for any Hydra app.

`hydra/launcher=local` and `modal` send every job to one place; `sweep` (route=device) asks the app's hooks
where each job runs. What an app adds around its jobs (checks, recording, resume, the exit code) comes through
`hooks.LaunchHooks`; see docs/architecture.md. The work happens in `_launch` (imported on first launch: Hydra
scans this module at every start-up, so it stays light).
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from hydra_plugins.sweep_launcher._fast import TESTED_HYDRA, TESTED_OMEGACONF, fast_paths, fast_paths_tested

__all__ = ["ROUTES", "SweepLauncher", "TESTED_HYDRA", "TESTED_OMEGACONF", "fast_paths", "fast_paths_tested"]

# hydra.launcher.route: the app's hooks place each job | all local | all Modal (| all on an app's backend)
ROUTES = ("device", "local", "modal")


class SweepLauncher(Launcher):
    def __init__(
        self,
        route: str = "device",
        n_workers: Optional[int] = None,
        force: bool = False,
        batch: Any = None,
        progress: bool = True,
        time_limit_s: Any = None,
        preload: Sequence[str] = (),
        fast: Optional[bool] = None,
        modal: Any = None,
        backends: Any = None,
    ) -> None:
        routes = [*ROUTES, *(str(k) for k in (backends or {}))]  # an app's backends too (backends.py)
        if route not in routes:  # one line and exit 2, before any job (an exception would be Hydra's report)
            print(
                f"sweep: hydra.launcher.route={route!r} is not allowed: expected {', '.join(routes[:-1])} or "
                f"{routes[-1]}",
                file=sys.stderr,
                flush=True,
            )
            raise SystemExit(2)
        self.route = route
        self.n_workers = n_workers
        self.force = force
        self.batch = batch  # checked at the first launch (_batches.batch_size): one line, exit 2
        self.progress = progress
        self.time_limit_s = time_limit_s  # checked at the first launch (_launch.time_limit): one line, exit 2
        self.preload = [str(m) for m in preload]
        # the fast paths (FastComposer, the lean run_job) reproduce Hydra: on by default only on the Hydra and
        # OmegaConf versions they were tested against; elsewhere Hydra's public load_sweep_config and run_job
        self.fast = fast_paths(fast)
        self.modal: dict[str, Any] = dict(modal or {})
        self.backends: dict[str, Any] = dict(backends or {})  # name -> its _target_ config (backends.py)
        self.config: Optional[DictConfig] = None
        self.hydra_context: Optional[HydraContext] = None
        self.task_function: Optional[TaskFunction] = None
        self.multirun: Any = None  # _launch.Multirun, created by the first launch()

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        if self.fast and hydra_context is not None:
            from hydra_plugins.sweep_launcher._fast.compose import FastComposer  # noqa: PLC0415 - the fast path: imported only behind its version gate

            # The sweeper composes each job through this same context before launch: share the work.
            hydra_context.config_loader = FastComposer(hydra_context.config_loader)
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra_plugins.sweep_launcher import _launch  # noqa: PLC0415 - the launcher's work: on the first launch, not at Hydra's plugin scan

        return _launch.launch(self, job_overrides, initial_job_idx)
