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
import importlib.util
import threading
from typing import Any, Callable, Optional

# a unit of work: (index of its first job, its GPU or None, the payload `execute` takes)
Unit = tuple  # tuple[int, Optional[str], bytes]
Reply = Callable[[int, bytes], None]  # (the unit's first job index, execute's answer for it)


def modal_missing() -> bool:
    return importlib.util.find_spec("modal") is None


class Backend:
    """A place jobs run. Subclass it and implement `run`."""

    # the jobs' output directories come back with their replies (a machine of its own, whose disk is gone after)
    collect_files: bool = True

    def missing(self) -> Optional[str]:
        """Why this backend cannot run anything on this machine (a package not installed), said as each of its
        jobs' failure; None: it can."""
        return None

    def run(self, units: list, reply: Reply, stop: threading.Event) -> None:
        """Run every unit, calling `reply(idx, answer)` once per unit as it ends (`answer`: what `execute(idx,
        payload)` returned, or any bytes that are not a reply, which fail the unit's jobs). Runs in a thread of
        its own; return early once `stop` is set (the sweep was interrupted)."""
        raise NotImplementedError


class ModalBackend(Backend):
    """Modal's containers, one Function per GPU type (`_modal_app`: the [modal] extra, imported only here)."""

    def __init__(self, options: Optional[dict] = None) -> None:
        self.options = {k: v for k, v in (options or {}).items() if k != "offline"}

    def missing(self) -> Optional[str]:
        import importlib.util  # noqa: PLC0415 - only where a job is placed on Modal

        if importlib.util.find_spec("modal") is not None:
            return None
        from hydra_plugins.sweep_launcher.commands import command  # noqa: PLC0415 - only to say so

        pip = command("pip", "install", "sweep-launcher[modal]")
        return f"this job runs on Modal, which needs the modal package: {pip} (or {command('pip', 'install', 'modal')})"

    def run(self, units: list, reply: Reply, stop: threading.Event) -> None:
        from hydra_plugins.sweep_launcher import _modal_app  # noqa: PLC0415 - Modal: seconds to import

        _modal_app.run_remote(units, self.options, reply, stop)


BUILT_IN = ("modal",)


def backends(modal_options: Optional[dict], configured: Optional[dict]) -> dict:
    """The sweep's backends, made once: Modal's and those named under hydra.launcher.backends (Hydra makes them
    with the launcher)."""
    out: dict[str, Any] = {"modal": ModalBackend(modal_options)}
    for name, conf in (configured or {}).items():
        backend = conf  # Hydra instantiates the launcher's config recursively: its `_target_`s are made already
        if not isinstance(backend, Backend):
            raise TypeError(f"hydra.launcher.backends.{name} made a {type(backend).__name__}, not a Backend")
        out[str(name)] = backend
    return out
