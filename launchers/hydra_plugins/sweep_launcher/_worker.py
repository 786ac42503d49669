"""A local worker process's loop: receive a session once per batch, then jobs; send back each Reply."""

from __future__ import annotations

import functools
import gc
import importlib
import os
import pickle
import queue
import sys
import threading
from typing import Any, NoReturn, Sequence

from hydra_plugins.sweep_launcher import timer
from hydra_plugins.sweep_launcher._core import (
    Pickled,
    Session,
    Spec,
    dump_reply,
    load_session,
    make_batch_payload,
    make_payload,
    run_batch,
    run_one,
    split_replies,
)


def _template(templates: dict[int, Any], tpl: Any) -> Any:
    """The job's template (`_fast/template.Template`), made from what the launcher sends the first time it comes:
    (id, (hydra section as plain data, whole config pickled, task part pickled) or None), or None."""
    if tpl is None:
        return None
    if tpl[1] is not None:
        from hydra_plugins.sweep_launcher._fast.template import Template  # noqa: PLC0415 - the fast path: imported only behind its version gate

        templates[tpl[0]] = Template(*tpl[1])
    return templates.get(tpl[0])


def _source(templates: dict[int, Any], config: Any) -> Any:
    """What run_one reads the job's config from: its template and values (`Spec`), or its pickled bytes."""
    return templates[config.template].made(config) if isinstance(config, Spec) else Pickled(config)


def _read(conn: Any, inbox: queue.SimpleQueue) -> None:
    """Receive the launcher's messages as they come, while the worker runs: a batch's message may be larger than
    the pipe holds, and the launcher sending it must never wait on a worker that is itself waiting to send its
    replies. End of file: the launcher is gone (`_orphaned`)."""
    while True:
        try:
            inbox.put(conn.recv_bytes())
        except (EOFError, OSError):
            _orphaned()


def _orphaned() -> NoReturn:
    """The launcher is gone (killed): its pipe closed before the kernel's SIGKILL for this worker came (the launcher's
    files close first as a process ends), or where no such SIGKILL is asked for (not Linux: `_pool`). This worker ends
    now, quietly, whatever it runs: no one is left to take its result (the next sweep runs that job again), and a
    reply sent into the closed pipe was a BrokenPipeError traceback on the user's terminal."""
    os._exit(0)


def _send(conn: Any, data: bytes) -> None:
    """The job's output, then its reply (once the launcher has the reply, nothing of the job is left in this
    process: a worker stopped at the end of the sweep, or killed, loses no line); the launcher gone: `_orphaned`."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        conn.send_bytes(data)
    except OSError:  # BrokenPipeError, ConnectionResetError: the pipe's (or the terminal's) reader is gone
        _orphaned()


def worker_main(conn: Any, preload: Sequence[str] = ()) -> None:
    """("session", sid, bytes) once per batch, then ("job", sid, idx, config, via, template) or ("batch", sid,
    [(idx, config, template), ...], via: jobs solved together, one reply each), `via`: None, or (the backend whose
    `run_here` runs them, their GPU)
    ...; ("stop", 0) or end-of-file ends it. A config: its pickled bytes, or a `Spec` of its template; a template:
    see `_fast/template`."""
    # Workers share the launcher's stdout and stderr. Unbuffered (PYTHONUNBUFFERED, python -u), print writes its
    # text and its newline apart, and lines of two processes interleave between them; line-buffered, each line
    # of a job reaches the pipe in one write (atomic up to PIPE_BUF), whatever the environment.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True, write_through=False)
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    # What is loaded now (modules, the launcher's state inherited by fork) lives as long as the worker: out of
    # the collector's sight, a job's garbage collections no longer rescan it (they were ~1/3 of a small job).
    gc.freeze()
    sessions: dict[int, tuple[Session, bytes]] = {}  # sid -> (the session, its bytes: a backend's payload)
    templates: dict[int, Any] = {}  # template id -> its _fast/template.Template (sent once)
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=_read, args=(conn, inbox), daemon=True, name="sweep-worker-inbox").start()
    while True:
        msg = inbox.get()
        kind, sid, *rest = pickle.loads(msg)  # cloudpickle's output loads with plain pickle
        if kind == "stop":
            return
        if kind == "session":
            sessions = {sid: (load_session(rest[0]), rest[0])}  # one batch at a time: drop older sessions
            # under a time limit, the app's clock messages (timer.py) go on the replies' pipe, from this thread
            timer._send = functools.partial(_send, conn) if sessions[sid][0].time_limited else None
            continue
        if kind == "batch":
            items = [(idx, config, _template(templates, tpl)) for idx, config, tpl in rest[0]]
            if rest[1]:  # placed on a backend that runs here (Modal offline): the batch through it
                backend, gpu = rest[1]
                payload = make_batch_payload(sessions[sid][1], [(idx, cfg_bytes) for idx, cfg_bytes, _ in items])
                answer = backend.run_here(items[0][0], payload, gpu)
                replies: Any = split_replies(answer, [idx for idx, _, _ in items])
            else:
                made = [(idx, _source(templates, c), t.yaml if t is not None else None) for idx, c, t in items]
                replies = (dump_reply(r) for r in run_batch(sessions[sid][0], made))
            for data in replies:
                _send(conn, data)
            continue
        idx, config, via, tpl = rest
        template = _template(templates, tpl)
        if via:
            data = via[0].run_here(idx, make_payload(sessions[sid][1], config), via[1])
        else:
            hydra_yaml = template.yaml if template is not None else None
            data = dump_reply(run_one(sessions[sid][0], idx, _source(templates, config), hydra_template=hydra_yaml))
        _send(conn, data)
