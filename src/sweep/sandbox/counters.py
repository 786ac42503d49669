"""The kernel's counters of the sandbox's processes, read by the parent from /proc: a measure of what the entrant
did that it cannot touch (its own process can forge anything it reports, not these).

The tree is the child and every process under it (bubblewrap's, the interpreter, anything it started), found by
/proc/<pid>/task/<tid>/children; each process's own CPU time and page faults and those of its children it has
waited for. A process that started and ended between two readings, and was not waited for, is missed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class Counters:
    cpu_s: float = 0.0  # user + system seconds
    minor_faults: int = 0  # pages first touched (memory the process made or first used)
    major_faults: int = 0  # pages read from disk
    peak_rss_mb: float = 0.0  # the largest resident set of one of its processes, so far

    def __sub__(self, before: "Counters") -> "Counters":
        return Counters(
            self.cpu_s - before.cpu_s,
            self.minor_faults - before.minor_faults,
            self.major_faults - before.major_faults,
            self.peak_rss_mb,
        )


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` now (any of its threads')."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def tree(pid: int) -> list[int]:
    """`pid` and every process under it now."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children(p)
    return out


def read(pid: int) -> Counters:
    """The counters of `pid`'s tree now (zeros for what cannot be read: a process gone, or not Linux)."""
    c = Counters()
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            with open(f"/proc/{p}/status") as f:
                hwm = next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
        except (OSError, ValueError, IndexError):
            continue
        # fields after the name: state(0) ppid pgrp session tty tpgid flags minflt(7) cminflt majflt(9) cmajflt
        # utime(11) stime cutime cstime
        c.minor_faults += int(fields[7]) + int(fields[8])
        c.major_faults += int(fields[9]) + int(fields[10])
        c.cpu_s += sum(int(x) for x in fields[11:15]) / TICK
        c.peak_rss_mb = max(c.peak_rss_mb, hwm / 1024)
    return c
