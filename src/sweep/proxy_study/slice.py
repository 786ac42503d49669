"""The next slice of the GPU design, on the GPU at hand, in at most ``--budget-s`` (480: 8 minutes):
``python benchmarks/proxy_slice.py``. Runs the design's (arm, repeat) pairs that no file of the dataset holds for
this device yet (design.gpu_design(): every configuration once, then the repeats), one job at a time in this process
(sweep.job.run: the same job `python -m sweep sweeps=proxy_study` runs), and appends each run's row to
docs/results/proxy_study/<device>-<date>.csv as soon as it ends: the device's name, driver, power limit and memory,
the meter's calibration figures, the Joules (dynamic, static, gross), the profiler's counts and every proxy. A run
is not started when the slice's time so far plus the longest run of that arm seen (in the dataset or this slice;
for an arm never run, the longest of any) would pass the budget. Without a GPU the CPU arm runs instead
(design.cpu_design(): the small twins on torch's CPU path, their Joules from RAPL where the machine has a readable
counter), into cpu-<model>-<date>.csv.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from sweep.arguments import summary
from sweep.paths import git_commit
from sweep.proxy_study import dataset, design

FACTS = ("gpu.name", "gpu.driver", "gpu.power_limit_w", "gpu.memory_gib", "cpu.model", "energy.meter")
CALIBRATION = ("energy_idle_w", "energy_calibration_ratio", "energy_counter_period_s", "energy_measure_repeats")
KEPT = (
    "wall_clock_s",
    "energy_measured_j",
    "energy_static_j",
    "energy_measured_gross_j",
    "energy_measure_window_s",
    "kernels",
    "profiled_flops",
    "profiled_read_bytes",
    "ard",
    "dmc",
    "dmd",
    "bytedmd",
    "energy_pj",
    "energy_memory_pj",
    "energy_compute_pj",
    "cache_miss_floats",
    "total_floats",
    "steps",
    "tokens",
    "accuracy",
)


@dataclass
class Slice:
    device: str
    path: Path
    written: list[str] = field(default_factory=list)  # "arm repeat=r" of each run written
    failed: list[str] = field(default_factory=list)
    left: int = 0  # runs of the design this device still lacks


def device_name(on_gpu: bool) -> str:
    if on_gpu:
        import torch  # noqa: PLC0415 - torch: seconds to import, only for the GPU's slice

        return torch.cuda.get_device_name()
    from sweep.proxy_study.ground_truth import machine  # noqa: PLC0415

    return f"cpu {machine()}"


def row_of(arm: str, repeat: int, result: object, seconds: float, device: str) -> dict[str, object]:
    m, tags = result.metrics, result.tags  # type: ignore[attr-defined]
    import torch  # noqa: PLC0415 - imported already by the job that ran

    row: dict[str, object] = {
        "device": device,
        "arm": arm,
        "repeat": repeat,
        "status": result.status,  # type: ignore[attr-defined]
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "job_s": round(seconds, 2),
        "commit": git_commit(),
        "torch": torch.__version__,
    }
    row.update({k.replace(".", "_"): tags.get(k, "") for k in FACTS})
    row["meter_reason"] = tags.get("energy.meter_reason", "")
    row.update({k: m.get(k, "") for k in (*CALIBRATION, *KEPT)})
    row.update({k: v for k, v in m.items() if k.endswith(("_reads", "_writes"))})  # the trace's floats per level
    return row


def run_slice(
    out_dir: Path,
    budget_s: float = 480.0,
    on_gpu: bool | None = None,
    limit: int | None = None,
    extra: Sequence[str] = (),
    started: float | None = None,
) -> Slice:
    """Run the device's next slice of the design (at most `limit` runs), appending each row as it ends."""
    from sweep import job  # noqa: PLC0415 - the job machinery: seconds to import, only for a run

    if on_gpu is None:
        import torch  # noqa: PLC0415

        on_gpu = torch.cuda.is_available()
    started = time.monotonic() if started is None else started
    name = device_name(on_gpu)
    rows = [r for r in dataset.read_all(out_dir) if r.get("device") == name]
    done = {(r["arm"], int(r["repeat"])) for r in rows}
    longest: dict[str, float] = {}
    for r in rows:
        longest[r["arm"]] = max(longest.get(r["arm"], 0.0), dataset.number(r.get("job_s")))
    todo = [(a, r) for a, r in (design.gpu_design() if on_gpu else design.cpu_design()) if (a, r) not in done]
    today = datetime.date.today().isoformat()
    out = Slice(name, out_dir / f"{dataset.slug(name)}-{today}.csv", left=len(todo))
    slowest = max(longest.values(), default=0.0)  # an arm never run yet is expected to take the longest seen
    for arm, repeat in todo:
        if limit is not None and len(out.written) + len(out.failed) >= limit:
            break
        expect = longest.get(arm, slowest)
        if time.monotonic() - started + expect > budget_s:
            break
        t0 = time.monotonic()
        label = f"{arm} repeat={repeat}"
        try:
            result = job.run(design.compose([*design.overrides(arm, repeat, on_gpu), *extra]))
        except Exception as e:  # noqa: BLE001 - a failed run is a row (status FAILED, its error), not a lost slice
            seconds = time.monotonic() - t0
            row = {"device": name, "arm": arm, "repeat": repeat, "status": "FAILED", "job_s": round(seconds, 2)}
            row["error"] = (traceback.format_exception_only(e)[-1]).strip()
            dataset.append(out.path, row)
            out.failed.append(label)
            print(f"proxy_slice: {label} FAILED: {row['error']}", file=sys.stderr, flush=True)
        else:
            seconds = time.monotonic() - t0
            dataset.append(out.path, row_of(arm, repeat, result, seconds, name))
            out.written.append(label)
            j = result.metrics.get("energy_measured_j")
            print(f"proxy_slice: {label}: {seconds:.1f} s, dynamic J {j if j is not None else '-'}", flush=True)
        slowest = max(slowest, seconds)
        longest[arm] = max(longest.get(arm, 0.0), seconds)
        out.left -= 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    started = time.monotonic()
    ap = argparse.ArgumentParser(description=summary(__doc__))
    ap.add_argument("--out", type=Path, default=dataset.DATASET_DIR, help="the dataset's directory")
    ap.add_argument("--budget-s", type=float, default=480.0, help="no run is started that would end past this")
    ap.add_argument("--limit", type=int, default=None, help="at most this many runs")
    ap.add_argument("--cpu", action="store_true", help="the CPU arm even where there is a GPU")
    ap.add_argument("overrides", nargs="*", help="overrides added to every run (e.g. tracker.meter_window_s=0.5)")
    a = ap.parse_args(argv)
    s = run_slice(a.out, a.budget_s, False if a.cpu else None, a.limit, a.overrides, started)
    print(
        f"proxy_slice: {len(s.written)} runs written to {s.path}"
        + (f", {len(s.failed)} failed ({', '.join(s.failed)})" if s.failed else "")
        + f"; {s.left} of the design left for {s.device}"
        + (" (run again to go on)" if s.left else " (the design is complete)")
    )
    return 1 if s.failed and not s.written else 0
