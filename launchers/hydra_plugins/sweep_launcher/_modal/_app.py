"""Modal side of the launcher: a real modal.App, an Image carrying the project, one Function per GPU type.

Every Function wraps `_core.execute` ((job index, payload bytes) -> (job index, reply bytes)). Offline mode calls
the very same Function through `Function.local()` on a local worker process, so only the network hop is left untested;
real mode fans the jobs out with `Function.starmap` inside `app.run()` (retries: `modal.Retries`) and streams
each reply back as its job finishes.

Credentials: Modal's own token mechanism (`modal token new` / `modal token set`, or MODAL_TOKEN_ID and
MODAL_TOKEN_SECRET). Nothing here reads, logs or forwards the token; error texts are scrubbed of it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Optional

import modal
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from hydra_plugins.sweep_launcher._core import Reply, execute
from hydra_plugins.sweep_launcher._pickling import dumps
from hydra_plugins.sweep_launcher.commands import command
from hydra_plugins.sweep_launcher.config import ModalConf

try:
    from tomllib import loads as _toml_loads
except ModuleNotFoundError:  # Python 3.10: modal's own dependency reads it
    from toml import loads as _toml_loads

REMOTE_ROOT = "/project"  # where the image holds the app's project (a path inside the container)
REMOTE_PLUGIN = "/plugin"  # where it holds this plugin, when the plugin lives outside the project
PLUGIN_ROOT = Path(__file__).resolve().parents[3]  # the directory holding this plugin's hydra_plugins/
# what stays out of the image: environments, stores, outputs, caches
IGNORE = [".git", ".venv", "venv", "mlruns", "outputs", "multirun", "**/__pycache__", "**/*.pyc", "**/*.egg-info"]
# Distributions a job needs in any container (the plugin's own); the app's project adds its dependencies. Each
# is pinned to this machine's version where installed here: the payload and the replies are pickles of their
# objects, which must load with the same library versions on both sides.
PLUGIN_DISTRIBUTIONS = ("hydra-core", "omegaconf", "cloudpickle", "modal")


def token_setup() -> str:
    """How to give Modal a token, with commands that work pasted here (Modal's CLI beside this interpreter)."""
    return (
        f"`{command('modal', 'token', 'new')}` (opens a browser), or `{command('modal', 'token', 'set')} --token-id "
        "<id> --token-secret <secret>`, or export MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"
    )


def token_help() -> str:
    """What to do without a token: set one up, or run on this machine's GPU without the network."""
    return (
        f"Modal has no API token on this machine. Set one up with {token_setup()}; or run on this machine's GPU "
        "without the network: hydra.launcher.modal.offline=true"
    )


def project_root() -> Path:
    """The app's project: the nearest directory above the running program (`python -m app`, a script) that
    holds a pyproject.toml; else the working directory."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    start = Path(main).resolve().parent if main else Path.cwd()
    return next((d for d in (start, *start.parents) if (d / "pyproject.toml").is_file()), Path.cwd())


def requirements(root: Path) -> list[str]:
    """What the container pip-installs: the plugin's distributions and the dependencies in the project's
    pyproject.toml, each pinned to the version installed here (2.x+cpu -> 2.x: the CUDA wheel there), or as
    written where it is not installed here."""
    specs = list(PLUGIN_DISTRIBUTIONS)
    if (root / "pyproject.toml").is_file():
        specs += _toml_loads((root / "pyproject.toml").read_text()).get("project", {}).get("dependencies", [])
    out: dict[str, str] = {}
    for spec in specs:
        req = Requirement(spec)
        if (req.marker is not None and not req.marker.evaluate()) or canonicalize_name(req.name) in out:
            continue
        try:
            pinned = f"{req.name}=={metadata.version(req.name).split('+')[0]}"
        except metadata.PackageNotFoundError:
            pinned = str(req)
        out[canonicalize_name(req.name)] = pinned
    return list(out.values())


def layout(root: Path) -> tuple[list[tuple[Path, str]], list[str]]:
    """(local directory, its place in the container) to copy, and the container's PYTHONPATH: the project at
    REMOTE_ROOT, with each directory this process imports from inside it (its `src/` also, the standard layout
    whose editable install may use an import hook instead), and this plugin: within the project where it
    lives there, else its own package at REMOTE_PLUGIN."""
    root = root.resolve()

    def remote(d: Path) -> str:
        rel = d.relative_to(root).as_posix()
        return REMOTE_ROOT if rel == "." else f"{REMOTE_ROOT}/{rel}"

    def shipped(d: Path) -> bool:  # inside the project and not left out of the image (an environment in it)
        return d.is_dir() and d.is_relative_to(root) and not set(d.relative_to(root).parts) & set(IGNORE)

    dirs = [Path(p or ".").resolve() for p in sys.path] + [root / "src", PLUGIN_ROOT]
    path = [remote(d) for d in dirs if d != root and shipped(d)]
    copies = [(root, REMOTE_ROOT)]
    if not shipped(PLUGIN_ROOT):
        copies.append((Path(__file__).resolve().parents[1], f"{REMOTE_PLUGIN}/hydra_plugins/sweep_launcher"))
        path.append(REMOTE_PLUGIN)
    return copies, list(dict.fromkeys(path + [REMOTE_ROOT]))  # the project's root last: its packages first


def build_image(python_version: Optional[str] = None) -> modal.Image:
    """debian_slim + the pinned requirements + the app's project and this plugin (`layout`)."""
    root = project_root()
    copies, path = layout(root)
    pv = python_version or f"{sys.version_info.major}.{sys.version_info.minor}"
    image = modal.Image.debian_slim(python_version=pv).pip_install(*requirements(root))
    image = image.env({"PYTHONPATH": ":".join(path)})
    for local, remote in copies:
        image = image.add_local_dir(local, remote, ignore=IGNORE)
    return image


def retries(n: int) -> Any:
    """n retries of a failed container call, with exponential back-off (Modal's own policy object)."""
    return modal.Retries(max_retries=n, backoff_coefficient=2.0, initial_delay=1.0) if n > 0 else 0


def function_name(gpu: Optional[str]) -> str:
    return "sweep_job_" + (re.sub(r"[^A-Za-z0-9]+", "_", gpu).strip("_").lower() if gpu else "cpu")


def settings(opts: dict[str, Any]) -> ModalConf:
    """The launcher's `hydra.launcher.modal` options over their defaults (written once, in config.ModalConf)."""
    known = {f.name for f in dataclasses.fields(ModalConf)}
    return ModalConf(**{k: v for k, v in opts.items() if k in known})


def build_app(opts: dict[str, Any], gpus: Iterable[Optional[str]]) -> tuple[modal.App, dict[Optional[str], Any]]:
    """A modal.App with one Function per GPU type (gpu=None: a CPU container), all wrapping `execute`."""
    conf = settings(opts)
    app = modal.App(conf.app_name)
    image = build_image(conf.python_version)
    fns = {}
    for gpu in sorted(set(gpus), key=str):
        # serialized=True: the Function is made in a factory (its gpu comes from the job), not at import time
        fns[gpu] = app.function(
            image=image,
            gpu=gpu,
            timeout=int(conf.timeout),
            retries=retries(int(conf.retries)),
            max_containers=int(conf.max_containers),
            serialized=True,
            name=function_name(gpu),
        )(execute)
    return app, fns


@lru_cache(maxsize=8)
def _offline_function(opts_items: tuple, gpu: Optional[str]) -> Any:
    # Built where it is used: a cloudpickled modal.Function is not usable after unpickling.
    return build_app(dict(opts_items), [gpu])[1][gpu]


def run_offline(idx: int, payload: bytes, via: dict[str, Any]) -> bytes:
    """The job through the real Function's `.local()`: same code path as a container, no network."""
    opts = {k: v for k, v in via.items() if k != "gpu"}
    fn = _offline_function(tuple(sorted(opts.items())), via.get("gpu"))
    return fn.local(idx, payload)[1]


def token_problem() -> Optional[str]:
    """None when Modal has credentials configured: read as Modal's own client reads them (its config:
    MODAL_TOKEN_ID / MODAL_TOKEN_SECRET, else the active profile of ~/.modal.toml), without the network."""
    from modal.config import config  # noqa: PLC0415 - Modal: the [modal] extra, seconds to import

    if config.get("token_id") and config.get("token_secret"):
        return None
    return token_help()


def scrub(text: str) -> str:
    """Remove Modal credentials from a text that is about to be printed or recorded."""
    from modal.config import config  # noqa: PLC0415 - Modal: the [modal] extra, seconds to import

    secrets = {
        config.get("token_id"),
        config.get("token_secret"),
        os.environ.get("MODAL_TOKEN_ID"),
        os.environ.get("MODAL_TOKEN_SECRET"),
    }
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return text


def failure(idx: int, message: str) -> bytes:
    return dumps(Reply(idx=idx, job_return=None, error=scrub(message)))


def run_remote(
    jobs: list[tuple[int, Optional[str], bytes]], opts: dict[str, Any], out: Any, stop: threading.Event
) -> None:
    """Thread body (`ModalBackend.run`): run `jobs` (idx, gpu, payload) on Modal, call `out(idx, reply
    bytes)` as each finishes.

    One `Function.starmap` over (idx, payload) per GPU type (in parallel), unordered: each reply arrives as its
    job ends. `execute` never raises (a task's error is in its Reply), so an exception out of the map is Modal's
    own (a container lost, a timeout after `modal.Retries`): the jobs it left unanswered become FAILED with its
    message."""
    answered: set[int] = set()
    lock = threading.Lock()

    def send(idx: int, data: bytes) -> None:
        with lock:
            if idx not in answered:
                answered.add(idx)
                out(idx, data)

    def fan_out(fn: Any, group: list[tuple[int, bytes]]) -> None:
        errors: list[str] = []
        for item in fn.starmap(group, order_outputs=False, return_exceptions=True):
            if stop.is_set():
                return
            if isinstance(item, tuple):  # execute's (idx, reply bytes): loaded once, by the launcher
                send(*item)
            else:
                errors.append(f"Modal: {type(item).__name__}: {item}")
        for idx, _ in group:  # what the map did not answer
            if not stop.is_set():
                send(idx, failure(idx, errors[0] if errors else "Modal: no result came back"))

    try:
        app, fns = build_app(opts, [g for _, g, _ in jobs])
        with app.run():
            groups: dict[Optional[str], list[tuple[int, bytes]]] = {}
            for idx, gpu, payload in jobs:
                groups.setdefault(gpu, []).append((idx, payload))
            with ThreadPoolExecutor(max_workers=len(groups)) as pool:
                for f in [pool.submit(fan_out, fns[gpu], group) for gpu, group in groups.items()]:
                    f.result()
    except Exception as e:  # noqa: BLE001 - AuthError, no network: every unanswered job FAILED, at once
        msg = f"Modal: {type(e).__name__}: {e}"
        if type(e).__name__ == "AuthError":
            msg += "\n" + token_help()
        for idx, _, _ in jobs:
            if not stop.is_set():
                send(idx, failure(idx, msg))
