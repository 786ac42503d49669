"""ByteDMD's speed: sweep's run-based, memoised live-stack pass (sweep.trace.live_stack, sweep.trackers.bytedmd)
against a per-element implementation (a Fenwick tree over stack slots, O(log n) a touched element, written here)
on the same traces; both must give the same ByteDMD. Then the default SGD job's traces (n=20, H=200): the pass
beside DMD's, and the figures, with the size of the stored trace (trace.json).

    .venv/bin/python benchmarks/bench_bytedmd.py [--hidden 200] [--steps 20] [--repeats 3]

Traces: the published single-sample step of the default SGD job, and the first `--steps` steps of its
whole-solve trace (tracker.scope=all_steps); for the whole solve (1,408 steps, ~1.2e8 element accesses) the
per-element time is extrapolated from its first steps' rate, element accesses per second. Each of the `--repeats`
rounds times both implementations back to back, which goes first alternating (paired.rounds): rates and times are
medians, a measured ratio the median of the rounds' with its range (the whole solve's is an estimate: the median
per-element rate against the median pass).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from paired import ratios, rounds, spread

from sweep import job
from sweep.config.schema import register_configs
from sweep.trace import stored
from sweep.trace.live_stack import inputs, operations
from sweep.trace.trace import Trace
from sweep.trackers.bytedmd import bytedmd
from sweep.trackers.dmd import dmd


class Fenwick:
    """Prefix sums over slots 1..n, point updates, both O(log n)."""

    def __init__(self, n: int) -> None:
        self.tree = [0] * (n + 1)

    def add(self, i: int, v: int) -> None:
        tree, n = self.tree, len(self.tree)
        while i < n:
            tree[i] += v
            i += i & -i

    def prefix(self, i: int) -> int:
        s, tree = 0, self.tree
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s


def per_element(trace: Trace) -> int:
    """ByteDMD (one byte an element) one element at a time: every value gets a slot, higher slots nearer the top;
    a depth is the live values at or above its slot."""
    tpls, seq = trace.segments()
    ops = [op for t in seq for op in operations(tpls[t])]
    # pass 1: the values each operation reads and writes, and each value's last read
    current: dict[tuple[str, int], int] = {}
    for name, lo, hi in reversed(inputs(tpls, seq)):  # bottom first
        for j in range(lo, hi):
            current[(name, j)] = len(current)
    n_values = len(current)
    start = list(range(n_values))
    reads, writes, last = [], [], {}
    for i, (rs, ws) in enumerate(ops):
        got = []
        for name, size, _ in rs:
            for j in range(size):
                v = current[(name, j)]
                got.append(v)
                last[v] = i
        reads.append(got)
        made = []
        for name, size, _ in ws:
            for j in range(size):
                current[(name, j)] = n_values
                made.append(n_values)
                n_values += 1
        writes.append(made)
    # a value never touched again after its write stays where the trace reads its buffer somewhere (a result)
    read = {name for rs, _ in ops for name, _, _ in rs}
    final = {v for (name, _), v in current.items() if name in read}
    # pass 2: the stack as slots in a Fenwick tree
    slots = len(start) + sum(map(len, reads)) + n_values
    tree, slot, top = Fenwick(slots), {}, 0
    for v in start:
        top += 1
        slot[v] = top
        tree.add(top, 1)
    live, total = len(start), 0
    for i in range(len(ops)):
        for v in reads[i]:
            d = live - tree.prefix(slot[v] - 1)
            total += math.isqrt(d - 1) + 1
        for v in dict.fromkeys(reads[i]):  # moved up in order of first read
            tree.add(slot[v], -1)
            top += 1
            slot[v] = top
            tree.add(top, 1)
            if last[v] == i:  # its last read: dead
                tree.add(top, -1)
                live -= 1
        for v in writes[i]:
            top += 1
            slot[v] = top
            if v in last or v in final:  # read later, or a result; else dead at once
                tree.add(top, 1)
                live += 1
    return total


def timed(f, *args, min_s: float = 0.5) -> tuple[float, float]:
    """(result, seconds per call), repeating fast calls for at least min_s."""
    calls, t0 = 0, time.perf_counter()
    while True:
        value = f(*args)
        calls += 1
        if time.perf_counter() - t0 >= min_s:
            return value, (time.perf_counter() - t0) / calls


def paired_times(passes: dict, trace: Trace, repeats: int) -> tuple[dict, dict[str, list[float]]]:
    """(each pass's last result, its seconds a call per round): the passes timed back to back each round, the
    per-element one once a round (min_s 0: it is the slow one)."""
    values: dict = {}

    def once(name: str) -> float:
        values[name], seconds = timed(passes[name], trace, min_s=0.0 if name == "element" else 0.5)
        return seconds

    return values, rounds({name: (lambda name=name: once(name)) for name in passes}, repeats)


def job_traces(hidden: int, scope: str) -> tuple[Trace, dict[str, Trace]]:
    from hydra import compose, initialize_config_dir

    from sweep.paths import CONF_DIR

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["tracker=bytedmd", f"tracker.scope={scope}", f"method.hidden={hidden}"])
    _, j = job.prepare(cfg)
    solved = job.solve(j, cfg.device)
    return j.ctx.trace, solved.outcome.traces


def first_steps(trace: Trace, steps: int) -> Trace:
    tpls, seq = trace.segments()
    return Trace.from_segments(tpls, seq[:steps], {})


def fresh_bytedmd(t: Trace) -> float:
    return bytedmd(t)  # a new memo each call: the job's cost, not a warm memo's


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3, help="paired timings of the two implementations")
    args = ap.parse_args()
    published, _ = job_traces(args.hidden, "published")
    whole, epochs = job_traces(args.hidden, "all_steps")
    print(f"{'trace':<34} {'accesses':>12} {'element/s':>12} {'sweep/s':>14} {'ByteDMD':>14}  speed, sweep / element")
    rate = 0.0
    for label, t in (
        (f"published step, H={args.hidden}", published),
        (f"first {args.steps} steps of all_steps", first_steps(whole, args.steps)),
    ):
        accesses = sum(e[2] for e in t.events)
        v, ts = paired_times({"element": per_element, "sweep": fresh_bytedmd}, t, args.repeats)
        assert v["element"] == v["sweep"], v
        rate, t_got = accesses / statistics.median(ts["element"]), statistics.median(ts["sweep"])
        print(
            f"{label:<34} {accesses:>12,} {rate:>12,.0f} {accesses / t_got:>14,.0f} {v['sweep']:>14,.0f}  "
            f"{spread(ratios(ts['element'], ts['sweep']), 0)}"
        )
    per_template = [sum(e[2] for e in tpl) for tpl in whole.templates]
    accesses = sum(per_template[t] for t in whole.seq)
    v, ts = paired_times({"sweep": fresh_bytedmd, "dmd": dmd}, whole, args.repeats)
    got, t_got, t_dmd = v["sweep"], statistics.median(ts["sweep"]), statistics.median(ts["dmd"])
    print(
        f"{'whole solve (all_steps)':<34} {accesses:>12,} {'(est.)':>12} {accesses / t_got:>14,.0f} {got:>14,.0f}  "
        f"~{accesses / rate / t_got:,.0f}x (est.)"
    )
    print(
        f"\nwhole solve: {len(whole.seq) - 1:,} steps after the weights' writes, {len(whole.templates)} templates; "
        f"ByteDMD pass {t_got * 1e3:.1f} ms, DMD pass {t_dmd * 1e3:.1f} ms (medians); "
        f"per-element estimate {accesses / rate:,.0f} s"
    )
    print(
        f"trace.json: published {len(stored.dumps(published)):,} bytes, "
        f"all_steps {len(stored.dumps(whole, epochs)):,} bytes"
    )


if __name__ == "__main__":
    main()
