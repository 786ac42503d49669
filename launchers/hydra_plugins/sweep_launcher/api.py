"""The launcher's public API: all an app imports from this plugin. Everything else in the package is the
launcher's own and may change.

    the seam         LaunchHooks (subclass it, list it in hydra.callbacks), JobPlan (its one answer per job),
                     PlannedJob, Outcome, Tally, Refused; rerun_hint; batch_size, time_limit (the rules of the
                     settings a plan gives)
    backends         Backend (a place jobs run: hydra.launcher.backends), Unready (why it cannot take jobs now),
                     execute (runs a job's payload there)
    job names        Namer (what a job varies within its sweep)
    command lines    command, this_command (hints that work pasted into the user's shell), prog (the name a
                     command's one-line messages begin with: the one the user typed)
    signals          SIGNALS (the stop signals: Ctrl-C, SIGTERM, SIGHUP, Ctrl-\\; every handler installs these), listen,
                     listening, check_pending, as_interrupted, starting (one line and 128+n for each wherever it
                     comes, the launcher's own handling included); output_closed (a write's reader gone), reader_gone
    time limits      timer (the app says, in a worker, what a job's time limit covers)
    start-up         compose_once (a command's config composed once, where Hydra composes it twice)
    sweepers         JOBS_IN_SWEEP (the launcher attribute a sweeper that launches a batch at a time sets to the
                     jobs of its whole sweep: the progress line's total)

Names resolve on first use (PEP 562): Hydra's plugin scan runs this package's public modules again at start-up,
and an app that imports a name after the scan gets the scan's object, as if it imported the module itself.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Sequence

_HOME = {
    "LaunchHooks": "hooks",
    "JobPlan": "hooks",
    "PlannedJob": "hooks",
    "Outcome": "hooks",
    "Tally": "hooks",
    "Refused": "hooks",
    "rerun_hint": "hooks",
    "batch_size": "hooks",
    "time_limit": "hooks",
    "Backend": "backends",
    "Unready": "backends",
    "execute": "_core",
    "Namer": "naming",
    "command": "commands",
    "this_command": "commands",
    "prog": "commands",
    "listen": "_signals",
    "check_pending": "_signals",
    "as_interrupted": "_signals",
    "starting": "_signals",
    "output_closed": "_signals",
    "reader_gone": "_signals",
    "SIGNALS": "_signals",
    "listening": "_signals",
    "SweepLauncherConf": "config",
    "JOBS_IN_SWEEP": "_progress",
}
_MODULES = ("timer",)
__all__ = [*_HOME, *_MODULES, "compose_once"]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return import_module(f"{__package__}.{name}")
    if name in _HOME:
        return getattr(import_module(f"{__package__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compose_once(argv: Sequence[str] = ()) -> None:
    """Call before `@hydra.main`'s function runs: the command's config is composed once, not twice (the twin
    `_fast.compose_once`), where the fast paths hold (the tested Hydra and OmegaConf versions) and the command
    line (`argv`) does not turn them off with hydra.launcher.fast=false."""
    from hydra_plugins.sweep_launcher._fast import fast_paths  # noqa: PLC0415 - the switch: light, once

    if "hydra.launcher.fast=false" in argv or not fast_paths(None):
        return
    from hydra_plugins.sweep_launcher._fast.compose_once import install  # noqa: PLC0415 - behind the switch

    install()
