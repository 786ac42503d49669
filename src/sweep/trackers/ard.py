"""ARD: average reuse distance with the group's MemTracker semantics (seeds 001/002, specs/traces.md).

The clock counts floats and advances by each event's size after the event. A read's distance is the clock
at the read minus the clock at that buffer's last *write* (re-reads do not shorten it); a read of a buffer
never written has distance -1 and is left out of ARD and of the read count.
"""
from __future__ import annotations

from dataclasses import dataclass

from sweep.trackers.base import TrackerBase, TrackerReport
from sweep.trackers.trace import READ, Trace


def reuse_distances(trace: Trace) -> list[int]:
    """Per event: the reuse distance for reads (-1 if cold), -1 for writes."""
    last_write: dict[str, int] = {}
    out: list[int] = []
    clock = 0
    for op, name, size in trace:
        if op == READ:
            w = last_write.get(name)
            out.append(clock - w if w is not None else -1)
        else:
            last_write[name] = clock
            out.append(-1)
        clock += size
    return out


def ard_report(trace: Trace) -> TrackerReport:
    dists = reuse_distances(trace)
    num = 0.0
    den = 0
    reads = writes = 0
    dmc = 0.0
    per: dict[str, dict] = {}
    for (op, name, size), d in zip(trace, dists):
        row = per.setdefault(name, {"buffer": name, "size": size, "reads": 0, "writes": 0, "dists": []})
        row["size"] = max(row["size"], size)
        if op == READ:
            if d >= 0:
                reads += 1
                num += size * d
                den += size
                dmc += size * d**0.5
                row["reads"] += 1
                row["dists"].append(d)
        else:
            writes += 1
            row["writes"] += 1
    table = []
    for row in per.values():
        ds = row.pop("dists")
        row["min_dist"] = min(ds) if ds else None
        row["avg_dist"] = sum(ds) / len(ds) if ds else None
        row["max_dist"] = max(ds) if ds else None
        table.append(row)
    metrics = {
        "ard": num / den if den else 0.0,
        "reads": float(reads),
        "writes": float(writes),
        "total_floats": float(sum(trace.sizes)),
        "dmc": dmc,
    }
    return TrackerReport(metrics, table)


@dataclass
class ARDTracker(TrackerBase):
    """tracker=ard."""

    name: str = "ard"

    def summarize(self, trace: Trace) -> TrackerReport:
        return ard_report(trace)
