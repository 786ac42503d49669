"""The CPU's ground truth: the cache misses of a solve as it really executes (numpy's or torch's code, BLAS, the
interpreter), from valgrind's cache simulator on a stated hierarchy (HIERARCHY: the --I1/--D1/--LL options).

Debian's valgrind 3.19 has no ``--instr-at-start`` for cachegrind, whose counts would then hold the imports and the
set-up (measured: 22.5M D1 misses before a 0.3M-miss solve). Its sibling callgrind runs the same simulator with the
same cache options and can start uninstrumented (``--instr-atstart=no``): the driver turns instrumentation on with
``callgrind_control -i on`` once the job is built and off once the solve returns (sweep.proxy_study.solve_once).
Its profile also names the shared object of every cost (``ob=``), which splits the solve's misses into the
interpreter's (the Python executable and its standard library's extensions), the array libraries' (the
site-packages shared objects: numpy, its OpenBLAS, torch) and the system's (libc's memcpy/memset, libm, the loader).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

# The simulated hierarchy (size bytes, associativity, line bytes): a 32 KiB 8-way L1 as conf/energy/cpu.yaml's L1
# and the 1 MiB last level of its L3 slice. Valgrind simulates two levels: D1 and one last level (LL).
HIERARCHY = {"I1": (32768, 8, 64), "D1": (32768, 8, 64), "LL": (1048576, 16, 64)}
EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
CLASSES = ("arrays", "interpreter", "system")


def options() -> list[str]:
    return [f"--{k}={','.join(map(str, v))}" for k, v in HIERARCHY.items()]


def classify(obj: str, base: str | None = None, site: str | None = None) -> str:
    """Which code a shared object is: the array libraries (under site-packages), the interpreter (under the
    Python installation), or the system (the rest: libc, libm, the loader)."""
    base = base or sys.base_prefix
    site = site or sysconfig.get_paths()["purelib"]
    if "site-packages" in obj or obj.startswith(site):
        return "arrays"
    if obj.startswith(base) or "/python3" in obj or "libpython" in obj:
        return "interpreter"
    return "system"


def parse(text: str) -> dict[str, list[int]]:
    """Self cost per shared object of a callgrind profile (the events in EVENTS order). A cost line after
    ``calls=`` is the call's inclusive cost (already counted in the callee's own lines): skipped."""
    names: dict[str, str] = {}
    events: list[str] = []
    obj, skip = "???", False
    out: dict[str, list[int]] = {}

    def name(ref: str) -> str:  # "(3) /lib/x.so" defines id 3, "(3)" refers to it (--compress-strings)
        ref = ref.strip()
        if ref.startswith("("):
            i, _, rest = ref[1:].partition(")")
            if rest.strip():
                names[i] = rest.strip()
            return names.get(i, "???")
        return ref

    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("ob="):
            obj = name(line[3:])
        elif line.startswith("cob="):
            name(line[4:])
        elif line.startswith("calls="):
            skip = True
        elif line[0] in "0123456789+-*":
            if skip:
                skip = False
                continue
            vals = [int(v) for v in line.split()[1:]]
            row = out.setdefault(obj, [0] * len(events))
            for j, v in enumerate(vals):
                row[j] += v
    return {o: [row[events.index(e)] if e in events else 0 for e in EVENTS] for o, row in out.items()}


def figures(per_object: dict[str, list[int]]) -> dict[str, float]:
    """Data references, D1 misses and LL data misses of the whole solve and of each class of code."""
    out: dict[str, float] = {}
    groups: dict[str, list[list[int]]] = {"": list(per_object.values())}
    for obj, row in per_object.items():
        groups.setdefault(classify(obj), []).append(row)
    for cls in ("", *CLASSES):
        rows = groups.get(cls, [])
        tot = [sum(r[i] for r in rows) for i in range(len(EVENTS))]
        e = dict(zip(EVENTS, tot))
        suffix = f"_{cls}" if cls else ""
        out[f"cg_refs{suffix}"] = float(e["Dr"] + e["Dw"])
        out[f"cg_d1_misses{suffix}"] = float(e["D1mr"] + e["D1mw"])
        out[f"cg_ll_misses{suffix}"] = float(e["DLmr"] + e["DLmw"])
        if not cls:
            out["cg_instructions"] = float(e["Ir"])
    return out


def simulate(config: dict[str, Any], work: Path, python: str = sys.executable, timeout_s: float = 600) -> dict:
    """The figures of one solve of ``config`` (a job's resolved config) under callgrind on HIERARCHY. Raises
    RuntimeError with valgrind's last lines when the run fails."""
    work.mkdir(parents=True, exist_ok=True)
    cfg, out, log = work / "config.json", work / "callgrind.out", work / "valgrind.log"
    cfg.write_text(json.dumps(config))
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--cache-sim=yes",
        *options(),
        f"--callgrind-out-file={out}",
        f"--log-file={log}",
        python,
        "-m",
        "sweep.proxy_study.solve_once",
        str(cfg),
    ]
    # one BLAS thread: the simulator serialises threads, and a pool's start-up would be counted as the solve's
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for step in ("on", "off"):
            said = proc.stdout.readline().strip()
            if said not in ("ready", "done"):
                raise RuntimeError(f"solve_once said {said!r} instead of ready/done")
            subprocess.run(
                ["callgrind_control", "-i", step, str(proc.pid)], check=True, capture_output=True, timeout=60
            )
            proc.stdin.write("go\n")
            proc.stdin.flush()
        proc.wait(timeout=timeout_s)
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        proc.kill()
        proc.wait()
        tail = log.read_text().splitlines()[-5:] if log.exists() else []
        raise RuntimeError(f"callgrind run failed: {e}; {' | '.join(tail)}") from None
    if proc.returncode:
        tail = log.read_text().splitlines()[-5:] if log.exists() else []
        raise RuntimeError(f"callgrind run exited {proc.returncode}: {' | '.join(tail)}")
    return figures(parse(out.read_text()))
