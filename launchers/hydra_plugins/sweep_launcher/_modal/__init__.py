"""Modal, the built-in backend (`hydra.launcher.route=modal`, or jobs the app's plan places there): everything of
Modal the launcher has sits in this package, behind `backends.Backend`. `_app.py` is the real modal.App (the
[modal] extra, seconds to import); this module stays light, as Hydra's plugin scan imports it.

Offline (`hydra.launcher.modal.offline=true`, or SWEEP_MODAL_OFFLINE=1) the very same Function runs through
`Function.local()` on the local worker pool: no network, no token.
"""

# No `from __future__ import annotations`: Hydra's plugin scan execs this module outside sys.modules.
import importlib.util
import os
import threading
from typing import Optional

from hydra_plugins.sweep_launcher.backends import Backend, Reply, Unready
from hydra_plugins.sweep_launcher.commands import command


def installed() -> bool:
    return importlib.util.find_spec("modal") is not None


class ModalBackend(Backend):
    """Modal's containers, one Function per GPU type; offline, that Function's `.local()` on the local workers."""

    def __init__(self, options: Optional[dict] = None) -> None:
        options = dict(options or {})
        env_offline = os.environ.get("SWEEP_MODAL_OFFLINE", "").lower() in ("1", "true", "yes")
        self.on_workers = bool(options.pop("offline", False)) or env_offline
        self.options = options
        if self.on_workers and installed():  # import modal once here, before the workers fork, not once in each
            from hydra_plugins.sweep_launcher._modal import _app  # noqa: F401, PLC0415 - see the comment

    def missing(self) -> Optional[str]:
        if installed():
            return None
        pip = command("pip", "install", "sweep-launcher[modal]")
        return f"this job runs on Modal, which needs the modal package: {pip} (or {command('pip', 'install', 'modal')})"

    def unready(self) -> Optional[Unready]:
        """Modal without an API token (offline needs none; without the modal package each job fails with how to
        install it)."""
        if self.on_workers or not installed():
            return None
        from hydra_plugins.sweep_launcher._modal import _app  # noqa: PLC0415 - Modal: seconds to import

        if _app.token_problem() is None:
            return None
        return Unready(
            note="Modal has no API token here",
            fix=f"give Modal a token (`{command('modal', 'token', 'new')}`)",
            refusal="{n} job(s) placed on Modal, which has no API token on this machine: {instead}; or set Modal up "
            f"({_app.token_setup()}) and run this command again",
            instead="run them on this machine's GPU without the network: hydra.launcher.modal.offline=true",
        )

    def run(self, units: list, reply: Reply, stop: threading.Event) -> None:
        from hydra_plugins.sweep_launcher._modal import _app  # noqa: PLC0415 - Modal: seconds to import

        _app.run_remote(units, self.options, reply, stop)

    def run_here(self, idx: int, payload: bytes, gpu: Optional[str]) -> bytes:
        from hydra_plugins.sweep_launcher._modal._app import run_offline  # noqa: PLC0415 - Modal: seconds to import

        return run_offline(idx, payload, {**self.options, "gpu": gpu})
