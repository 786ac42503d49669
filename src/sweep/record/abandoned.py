"""Parent runs a killed launcher left RUNNING: each parent names its launcher process (host, pid and the process's
start time, `owner_tags`); the next sweep on the store marks those whose process is gone KILLED, their children
with them."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from sweep.record.tags import HOST_TAG, KILLED_REASON_TAG, PARENT_RUN_TAG, PARENT_TAG, PID_TAG, PROC_START_TAG


def owner_tags() -> dict[str, str]:
    """This process, as a parent run it opens names it."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()), PROC_START_TAG: proc_start(os.getpid())}


def repair_abandoned(client: Any, experiment_id: str) -> list[str]:
    """Parent runs of this experiment left RUNNING by a launcher process that is gone (SIGKILL, a crash, a
    power cut), and their RUNNING children: marked KILLED, with the reason in a tag. A run whose launcher
    still runs (another sweep on this store) or runs on another host is left alone. Returns the ids."""
    repaired: list[str] = []
    for run in client.search_runs(
        [experiment_id],
        max_results=1000,
        filter_string=f"attributes.status = 'RUNNING' and tags.`{PARENT_TAG}` = 'true'",
    ):
        tags = run.data.tags
        pid = tags.get(PID_TAG, "")
        if (
            tags.get(HOST_TAG) != socket.gethostname()
            or not pid.isdigit()
            or alive(int(pid), tags.get(PROC_START_TAG, ""))
        ):
            continue
        why = (
            f"launcher process {pid} on {tags[HOST_TAG]} ended without closing this run (killed); "
            f"marked KILLED at {time.strftime('%Y-%m-%d %H:%M:%S')} by the next sweep"
        )
        children = client.search_runs(
            [experiment_id],
            max_results=50000,
            filter_string=f"attributes.status = 'RUNNING' and tags.`{PARENT_RUN_TAG}` = '{run.info.run_id}'",
        )
        for r in [*children, run]:
            client.set_tag(r.info.run_id, KILLED_REASON_TAG, why)
            client.set_terminated(r.info.run_id, status="KILLED")
            repaired.append(r.info.run_id)
    return repaired


def _proc_stat(pid: int) -> list[str]:
    """Fields of /proc/PID/stat after the command name (Linux); [] elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        return []


def proc_start(pid: int) -> str:
    """The process's start time (clock ticks since boot, Linux): with the pid, it names one process even
    after the pid is reused. "" where /proc is not there."""
    stat = _proc_stat(pid)
    return stat[19] if len(stat) > 19 else ""


def alive(pid: int, start: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        pass
    stat = _proc_stat(pid)
    if stat and stat[0] in ("Z", "X"):  # a zombie: dead, not yet reaped by its parent
        return False
    return not start or len(stat) <= 19 or stat[19] == start
