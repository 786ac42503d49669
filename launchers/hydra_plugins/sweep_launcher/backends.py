"""Where jobs run besides this launcher's local workers: a `Backend` per place, chosen once per sweep.

As submitit keeps one executor per place behind one interface, a backend takes jobs as self-contained payloads
and hands back each job's answer: whatever it does in between (containers, a cluster's queue, a process per
job) is its own. A payload runs anywhere the app's code and this plugin can be imported, through `execute`
(`api.execute`): (job index, payload bytes) -> (job index, reply bytes); it never raises.

Modal is built in (`modal`); an app adds its own under `hydra.launcher.backends` (name -> a `_target_` config,
instantiated once per sweep), and sends jobs there with `hydra.launcher.route=<name>`, or from its hooks'
placement. The launcher itself stays the same: it checks every job, hands each unit (a job, or a batch of jobs
keyed alike) to its backend, records each answer as it comes, and stops the backend on a signal. See
docs/extending.md, "Add a launcher backend".
"""

# No `from __future__ import annotations`: Hydra's plugin scan execs this module outside sys.modules.
import threading
from dataclasses import dataclass
from importlib import import_module
from typing import Any, Callable, Optional

# a unit of work: (index of its first job, its GPU or None, the payload `execute` takes)
Unit = tuple  # tuple[int, Optional[str], bytes]
Reply = Callable[[int, bytes], None]  # (the unit's first job index, execute's answer for it)


@dataclass(frozen=True)
class Unready:
    """Why jobs placed on a backend cannot go there from this machine now, though it is installed (Modal without
    its API token). Such jobs are left out where others of the sweep run here; where none would, the sweep is
    refused (exit 2) before any job starts and before the app records anything."""

    note: str  # said with the jobs left out, and in the summary: "Modal has no API token here"
    fix: str  # what lets them run: "give Modal a token (`modal token new`)"
    refusal: str  # the refusal's words, with {n} (the jobs) and {instead} (what runs them here) to fill
    instead: str  # what runs them here, where the app's plan says nothing


class Backend:
    """A place jobs run. Subclass it and implement `run`."""

    # the jobs' output directories come back with their replies (a machine of its own, whose disk is gone after)
    collect_files: bool = True
    # its jobs run on this machine's worker pool, each through `run_here` (Modal offline: its Function's .local())
    on_workers: bool = False

    def missing(self) -> Optional[str]:
        """Why this backend cannot run anything on this machine (a package not installed), said as each of its
        jobs' failure; None: it can."""
        return None

    def unready(self) -> Optional[Unready]:
        """Asked once per sweep, at the first job placed here: None (default) where its jobs can go there now."""
        return None

    def run(self, units: list, reply: Reply, stop: threading.Event) -> None:
        """Run every unit, calling `reply(idx, answer)` once per unit as it ends (`answer`: what `execute(idx,
        payload)` returned, or any bytes that are not a reply, which fail the unit's jobs). Runs in a thread of
        its own; return early once `stop` is set (the sweep was interrupted)."""
        raise NotImplementedError

    def run_here(self, idx: int, payload: bytes, gpu: Optional[str]) -> bytes:
        """Where `on_workers`: one unit in a local worker process, answered as `run`'s units are."""
        raise NotImplementedError


# the backends every sweep has, by name: their classes, imported when the sweep begins (Modal: `_modal`)
BUILT_IN = {"modal": "hydra_plugins.sweep_launcher._modal.ModalBackend"}


def backends(options: dict, configured: Optional[dict]) -> dict:
    """The sweep's backends, made once: the built-in ones (each with its options under hydra.launcher.<name>) and
    those named under hydra.launcher.backends (Hydra makes them with the launcher)."""
    out: dict[str, Any] = {}
    for name, path in BUILT_IN.items():
        module, _, cls = path.rpartition(".")
        out[name] = getattr(import_module(module), cls)(options.get(name))
    for name, conf in (configured or {}).items():
        backend = conf  # Hydra instantiates the launcher's config recursively: its `_target_`s are made already
        if not isinstance(backend, Backend):
            raise TypeError(f"hydra.launcher.backends.{name} made a {type(backend).__name__}, not a Backend")
        out[str(name)] = backend
    return out
