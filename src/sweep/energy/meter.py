"""Measured energy: the hardware's cumulative energy counter read around repeated solves, less the device's idle
power, recorded only when a calibration probe shows the counter can be trusted (docs/energy.md, "Measured").

Counters (sweep.energy.counters): the GPU's (NVML's total-energy counter, through nvidia-ml-py) for torch on
cuda; RAPL through Linux powercap for the CPU (package zones plus their DRAM sub-zones). Per device and process,
a *baseline* is measured first and kept for ``BASELINE_TTL_S``:
- the counter's update period (NVML updates about every 100 ms: reads are aligned to its updates, so a window's
  energy is exact up to the counter's own error, not off by up to one period at each end);
- idle power: the counter over ``IDLE_S`` of nothing (the CUDA context loaded: the process holds it anyway);
- a calibration probe, a known kernel (matmuls) for ``PROBE_S``, whose counter energy must agree with the
  device's own instantaneous power reading integrated over the probe within ``CALIBRATION_TOL`` (NVML; RAPL has
  no second reading, so there the probe must raise the counter's rate above idle). A failed probe records no
  measured figure for the runs it covers: one line on stderr, the run recorded without it.
Then the solve is repeated (untraced, after the timed solve) until the window is at least ``window_s`` and
``MIN_PERIODS`` counter updates; the run's figure is (window energy - idle W x window) / repeats, its dynamic
energy; the static part, idle W x window / repeats, is recorded beside it (gross = static + dynamic).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sweep.energy.counters import POWERCAP, Counter, open_counter
from sweep.energy.counts import COUNTS
from sweep.trace.trace import NULL_TRACE

IDLE_S = 1.0  # idle power: the counter over this long with nothing running
PROBE_S = 1.0  # the calibration probe's length
CALIBRATION_TOL = 0.10  # |counter J / integral of power dt - 1| allowed (H200: 0.4-1% measured, docs/results)
MIN_PERIODS = 10  # a window spans at least this many counter updates (NVML: 1 s; its reads are aligned to them)
BASELINE_TTL_S = 60.0  # idle power and calibration are measured again after this long
POLL_S = 0.0005  # between reads while waiting for the counter's next update


@dataclass
class Baseline:
    idle_w: float
    period_s: float  # the counter's update period, as observed
    calibration: float  # probe: counter J / integral of the power reading (NVML), or probe W / idle W (RAPL)
    reason: str  # why the counter may not be trusted; "" when it may
    at: float  # when it was measured (time.monotonic)


@dataclass
class Measurement:
    joules: float  # per solve, above idle (dynamic)
    gross_j: float  # per solve, as the counter moved
    static_j: float  # per solve, idle power x its share of the window
    repeats: int
    window_s: float


def edge(counter: Counter, now: Callable[[], float], sleep: Callable[[float], None], max_wait_s: float) -> tuple:
    """(energy, time) at the counter's next update: reads aligned to updates make a window's energy exact. Gives
    up after ``max_wait_s`` (a counter that only moves under load) with the value as it is."""
    e0, t0 = counter.read_j(), now()
    while now() - t0 < max_wait_s:
        sleep(POLL_S)
        e = counter.read_j()
        if e != e0:
            return e, now()
    return e0, t0


def update_period(counter: Counter, now: Callable[[], float], sleep: Callable[[float], None], span_s: float) -> float:
    """The median time between the counter's updates over ``span_s`` (0 for a counter that moves every read)."""
    changes, last, t0 = [], counter.read_j(), now()
    while now() - t0 < span_s:
        sleep(POLL_S)
        e = counter.read_j()
        if e != last:
            changes.append(now())
            last = e
    gaps = sorted(b - a for a, b in zip(changes, changes[1:]))
    return gaps[len(gaps) // 2] if gaps else span_s


def measure_baseline(counter: Counter, now: Callable[[], float], sleep: Callable[[float], None]) -> Baseline:
    """Update period and idle power over IDLE_S, then the calibration probe."""
    period = update_period(counter, now, sleep, IDLE_S / 2)
    e0, t0 = edge(counter, now, sleep, 3 * period)
    sleep(IDLE_S / 2)
    e1, t1 = edge(counter, now, sleep, 3 * period)
    idle_w = (e1 - e0) / (t1 - t0) if t1 > t0 else math.nan

    samples: list[tuple[float, float]] = []

    def sample() -> None:  # the device's own power reading, through the probe
        w = counter.power_w()
        if w is not None:
            samples.append((now(), w))

    e0, t0 = edge(counter, now, sleep, 3 * period)
    sample()
    counter.probe(PROBE_S, sample)
    sample()  # the reading at the probe's end and at the counter's next update (its tail, integrated too)
    e1, t1 = edge(counter, now, sleep, 3 * period)
    sample()
    probe_j, span = e1 - e0, t1 - t0
    if samples:
        integral = _integral(samples, t0, t1)
        ratio = probe_j / integral if integral > 0 else math.nan
        ok = abs(ratio - 1) <= CALIBRATION_TOL
        why = (
            f"calibration probe: counter {probe_j:.1f} J vs power reading x time {integral:.1f} J over {span:.2f} s "
            f"(ratio {ratio:.3f}, allowed 1 +/- {CALIBRATION_TOL})"
        )
    else:  # RAPL: no second reading; the counter must at least respond to the probe's load
        ratio = (probe_j / span) / idle_w if span > 0 and idle_w > 0 else math.nan
        ok = ratio > 1
        why = f"calibration probe: the counter's rate under load is {ratio:.3f}x its idle rate (must exceed 1)"
    if not (math.isfinite(idle_w) and idle_w >= 0):
        ok, why = False, f"idle power not measurable: {idle_w} W"
    return Baseline(idle_w, period, ratio, "" if ok else why, time.monotonic())


def _integral(samples: list[tuple[float, float]], t0: float, t1: float) -> float:
    """The power samples' integral over [t0, t1] (trapezoids; the first and last held to the ends)."""
    pts = [(t0, samples[0][1]), *samples, (t1, samples[-1][1])]
    return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(pts, pts[1:]))


_baselines: dict[tuple[str, str], Baseline] = {}


def baseline_of(
    counter: Counter, key: str, now: Callable[[], float] = time.perf_counter, sleep: Callable = time.sleep
) -> Baseline:
    """The device's baseline, measured again when older than BASELINE_TTL_S."""
    b = _baselines.get((counter.name, key))
    if b is None or time.monotonic() - b.at > BASELINE_TTL_S:
        b = _baselines[(counter.name, key)] = measure_baseline(counter, now, sleep)
    return b


def measure(
    solve: Callable[[], Any],
    counter: Counter,
    clock: Callable[[], float],
    base: Baseline,
    window_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    max_repeats: int = 100_000,
) -> Measurement:
    """Run `solve` until the window is at least `window_s` and MIN_PERIODS counter updates (at least once),
    reading `counter` at its updates around the whole window; `clock` must wait for the device (Backend.clock
    synchronises cuda)."""
    wait = 3 * base.period_s
    e0, t0 = edge(counter, clock, sleep, wait)
    least = max(window_s, MIN_PERIODS * base.period_s)
    repeats = 0
    while True:
        solve()
        repeats += 1
        if clock() - t0 >= least or repeats >= max_repeats:
            break
    e1, t1 = edge(counter, clock, sleep, wait)
    gross, span = e1 - e0, t1 - t0
    static = base.idle_w * span
    return Measurement((gross - static) / repeats, gross / repeats, static / repeats, repeats, span)


def meter_solve(
    solve: Callable[[], Any],
    device: Any,
    clock: Callable[[], float],
    window_s: float,
    powercap: Path = POWERCAP,
    counter: Counter | None = None,
    now: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict[str, float], dict[str, str]]:
    """Metrics energy_measured_j (above idle) / energy_measured_gross_j / energy_static_j / energy_idle_w /
        energy_calibration_ratio / energy_counter_period_s / energy_measure_repeats / energy_measure_window_s and
        tags energy.meter (nvml | rapl | none), energy.meter_reason (when none) and the device's facts, of `solve`
        on `device` (a device config). `counter`, `now`, `sleep`: a counter and a time to use instead of the device's
    and the machine's (tests); `now` need not wait for the device (the baseline's probe does)."""
    reason = ""
    if counter is None:
        counter, reason = open_counter(device, powercap)
    if counter is None:
        return {}, {"energy.meter": "none", "energy.meter_reason": reason}
    facts = counter.facts()
    base = baseline_of(counter, str(getattr(device, "torch_device", "cpu")), now, sleep)

    def refuse(why: str) -> tuple[dict[str, float], dict[str, str]]:
        print(f"sweep: measured energy not recorded: {why}", file=sys.stderr)
        return {}, {"energy.meter": "none", "energy.meter_reason": why, **facts}

    if base.reason:
        return refuse(base.reason)
    m = measure(solve, counter, clock, base, window_s, sleep)
    if not (math.isfinite(m.joules) and m.joules > 0):  # a counter that did not move above idle is no measurement
        return refuse(
            f"{counter.name} counter: {m.gross_j * m.repeats:.3g} J over {m.window_s:.2f} s is not above idle "
            f"({base.idle_w:.1f} W)"
        )
    return (
        {
            "energy_measured_j": m.joules,
            "energy_measured_gross_j": m.gross_j,
            "energy_static_j": m.static_j,
            "energy_idle_w": base.idle_w,
            "energy_calibration_ratio": base.calibration,
            "energy_counter_period_s": base.period_s,
            "energy_measure_repeats": float(m.repeats),
            "energy_measure_window_s": m.window_s,
        },
        {"energy.meter": counter.name, **facts},
    )


def measure_solve(tracker: Any, method: Any, ctx: Any, device: Any) -> tuple[dict[str, float], dict[str, str]]:
    """The tracker's measured figures of `method`'s solve (only the energy tracker measures): untraced repeats
    after the timed solve, inside the job, so a Modal job's figure comes back with its result."""
    if tracker is None or getattr(method, "meters_itself", False):  # a user's training is not run twice
        return {}, {}
    untraced = dataclasses.replace(ctx, trace=NULL_TRACE)
    return tracker.measure(lambda: method.solve(untraced), device, ctx.backend.clock)


# the figures that are a solve's energy or counts (divided among a batch's runs); the rest are the meter's settings
PER_SOLVE = ("energy_measured_j", "energy_measured_gross_j", "energy_static_j", *COUNTS)


def per_run(measured: dict[str, float], runs: int) -> dict[str, float]:
    """A batch's measured figures as each of its ``runs`` runs' share (its energy / runs, as wall_clock_s)."""
    return {k: v / runs if k in PER_SOLVE else v for k, v in measured.items()}


FIXED_IDLE_W = 50.0  # the group's character challenge subtracts this constant (cybertronai/wikitext, EnergyMeter)


def meter_once(
    run: Callable[[], Any],
    device: Any,
    clock: Callable[[], float],
    counter: Counter | None = None,
    now: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Any, dict[str, float], dict[str, str]]:
    """`run()` once (a user's training) between two reads of the device's counter aligned to its updates:
    (its result, metrics, tags). Metrics train_energy_measured_j (less the idle power measured on this host, in
    this process, within BASELINE_TTL_S), train_energy_gross_j, train_energy_fixed50_j (less FIXED_IDLE_W, what
    the group's meter reports) and the baseline's energy_idle_w / energy_calibration_ratio /
    energy_counter_period_s; none, and the reason as the tag energy.meter_reason, where the counter cannot be
    read or trusted (then `run` is run unmetered). `counter`, `now`, `sleep`: as meter_solve's (tests)."""
    reason = ""
    if counter is None:
        counter, reason = open_counter(device)
    if counter is None:
        return run(), {}, {"energy.meter": "none", "energy.meter_reason": reason}
    facts = counter.facts()
    base = baseline_of(counter, str(getattr(device, "torch_device", "cpu")), now, sleep)
    if base.reason:
        print(f"sweep: measured energy not recorded: {base.reason}", file=sys.stderr)
        return run(), {}, {"energy.meter": "none", "energy.meter_reason": base.reason, **facts}
    wait = 3 * base.period_s
    e0, t0 = edge(counter, clock, sleep, wait)
    out = run()
    e1, t1 = edge(counter, clock, sleep, wait)
    gross, span = e1 - e0, t1 - t0
    return (
        out,
        {
            "train_energy_measured_j": gross - base.idle_w * span,
            "train_energy_gross_j": gross,
            "train_energy_fixed50_j": gross - FIXED_IDLE_W * span,
            "energy_idle_w": base.idle_w,
            "energy_calibration_ratio": base.calibration,
            "energy_counter_period_s": base.period_s,
            "energy_measure_window_s": span,
        },
        {"energy.meter": counter.name, **facts},
    )
