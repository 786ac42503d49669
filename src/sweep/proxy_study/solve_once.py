"""One job's solve between two handshakes, for valgrind's cache simulator (sweep.proxy_study.cachegrind):
``python -m sweep.proxy_study.solve_once CONFIG.json``. CONFIG.json is a job's resolved config
(sweep.job.job_config). The job is built untraced (a trace is the proxies' business, measured natively), then the
process prints ``ready`` and waits for a line on stdin; the driver turns the simulator's instrumentation on and
sends it; the method solves once, the process prints ``done`` and waits again while the driver turns it off. So the
misses counted are the solve's alone: not the imports', not the set-up's, not the interpreter's shutdown."""

from __future__ import annotations

import json
import sys

from sweep.job import build_job


def untraced(config: dict) -> dict:
    """The config with tracker=none's node (no trace, no meter: the solve alone)."""
    scope = config["tracker"].get("scope", "published")
    return {**config, "tracker": {"_target_": None, "name": "none", "scope": scope}}


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        config = untraced(json.load(f))
    job = build_job(None, config)  # type: ignore[arg-type] - the resolved config is all build_job reads
    print("ready", flush=True)
    sys.stdin.readline()
    job.method.solve(job.ctx)
    print("done", flush=True)
    sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
