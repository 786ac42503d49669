"""DMD throughput: sweep's run-based offline DMD (sweep.trackers.dmd) against a straightforward per-element
splay-tree implementation in pure Python (written here), on the same traces. Both must give the same DMD.

    .venv/bin/python benchmarks/bench_dmd.py [--hidden 1000] [--steps 10] [--repeats 3]

Traces: one single-sample standard step at n=20, H=hidden (the published protocol, ~1e5 element accesses at
H=1000), and `steps` consecutive single-sample steps after one INIT (a longer trace whose stack carries over).

Then the energy tracker's stack pass (every level of the cpu hierarchy in one LRU pass, sweep.energy.model)
against DMD's on the whole-solve trace (tracker.scope=all_steps) of SGD at n=20, hidden=--solve-hidden (200):
float accesses per second and their ratio (target: energy no slower than DMD, >= 1.0x).

Each of the `--repeats` rounds times both passes back to back, which goes first alternating (paired.rounds); rates
are medians, each ratio the median of the rounds' with its range.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
from paired import ratios, rounds, spread

from sweep.backend import Backend
from sweep.energy.hierarchy import load_hierarchy
from sweep.energy.model import level_counts
from sweep.methods.sgd import SGD, init_params
from sweep.trace.trace import READ, Trace
from sweep.trackers.dmd import dmd
from sweep.variants.standard import Standard


class _Node:
    __slots__ = ("left", "right", "parent", "size")

    def __init__(self, left: "_Node | None") -> None:
        self.left, self.right, self.parent = left, None, None
        self.size = 1 + (left.size if left else 0)


def _size(n: "_Node | None") -> int:
    return n.size if n else 0


class SplayStack:
    """The LRU stack as a splay tree keyed by write time (in-order: oldest to newest write), one node per
    element: a write deletes the element's node and inserts a new maximum; a read's depth is 1 + the number
    of nodes to its right."""

    def __init__(self) -> None:
        self.root: _Node | None = None
        self.nodes: dict[tuple[str, int], _Node] = {}

    def _rotate(self, x: _Node) -> None:
        p = x.parent
        g = p.parent
        if p.left is x:
            b = x.right
            p.left, x.right = b, p
        else:
            b = x.left
            p.right, x.left = b, p
        if b:
            b.parent = p
        p.parent, x.parent = x, g
        if g:
            if g.left is p:
                g.left = x
            else:
                g.right = x
        p.size = 1 + _size(p.left) + _size(p.right)
        x.size = 1 + _size(x.left) + _size(x.right)

    def _splay(self, x: _Node) -> None:
        while x.parent:
            p = x.parent
            g = p.parent
            if g:
                self._rotate(p if (g.left is p) == (p.left is x) else x)
            self._rotate(x)
        self.root = x

    def _remove(self, n: _Node) -> None:
        self._splay(n)
        left, right = n.left, n.right
        if left:
            left.parent = None
        if right:
            right.parent = None
        if left is None:
            self.root = right
            return
        m = left
        while m.right:
            m = m.right
        self._splay(m)  # m becomes the root of the left part, with no right child
        m.right = right
        if right:
            right.parent = m
        m.size = 1 + _size(m.left) + _size(right)
        self.root = m

    def write(self, el: tuple[str, int]) -> None:
        old = self.nodes.get(el)
        if old is not None:
            self._remove(old)
        new = _Node(self.root)
        if self.root:
            self.root.parent = new
        self.root = self.nodes[el] = new

    def depth(self, el: tuple[str, int]) -> int:
        n = self.nodes.get(el)
        if n is None:
            return _size(self.root) + 1
        self._splay(n)
        return _size(n.right) + 1


def splay_dmd(trace: Trace) -> float:
    stack = SplayStack()
    total = 0.0
    for op, name, size in trace:
        if op == READ:
            for j in range(size):
                total += math.sqrt(stack.depth((name, j)))
        else:
            for j in range(size):
                stack.write((name, j))
    return total


def step_trace(hidden: int, steps: int, n: int = 20, seed: int = 42) -> Trace:
    """INIT, then `steps` single-sample standard steps, each on a fresh sample labelled so that it fires."""
    be = Backend("numpy")
    p_np, rng = init_params(n, hidden, seed)
    p = {k: be.asarray(v) for k, v in p_np.items()}
    sgd, variant, t = SGD(hidden=hidden), Standard(), Trace()
    variant.init_trace(t, p)
    for _ in range(steps):
        x = rng.choice([-1.0, 1.0], size=(1, n))
        out = float(sgd.predict(be.xp, p, x)[0])
        y = np.array([-1.0 if out >= 0 else 1.0])  # margin -|out| < 1: the whole step runs
        t.write("x", n)
        t.write("y", 1)
        assert variant.step(be.xp, p, x, y, sgd.make_update(be.xp), t)
    return t


def timed(f, trace: Trace, min_s: float = 0.5) -> tuple[float, float]:
    """(result, seconds per call), repeating fast calls for at least min_s."""
    calls, t0 = 0, time.perf_counter()
    while True:
        value = f(trace)
        calls += 1
        if time.perf_counter() - t0 >= min_s:
            return value, (time.perf_counter() - t0) / calls


def paired_times(passes: dict, trace: Trace, repeats: int, min_s: dict) -> tuple[dict, dict[str, list[float]]]:
    """(each pass's last result, each pass's seconds a call per round), the passes timed back to back per round."""
    values: dict = {}

    def once(name: str) -> float:
        values[name], seconds = timed(passes[name], trace, min_s.get(name, 0.5))
        return seconds

    return values, rounds({name: (lambda name=name: once(name)) for name in passes}, repeats)


def solve_trace(hidden: int) -> Trace:
    """The all_steps trace of one default SGD solve (n=20, k=3, n_train=1000) at this width."""
    from sweep.methods.base import Context
    from sweep.problems.sparse_parity import SparseParity
    from sweep.variants.standard import Standard as StandardVariant

    problem, trace = SparseParity(), Trace()
    ctx = Context(
        problem=problem,
        data=problem.generate(),
        backend=Backend("numpy"),
        trace=trace,
        scope="all_steps",
        variant=StandardVariant(),
    )
    SGD(hidden=hidden).solve(ctx)
    return trace


def energy_vs_dmd(hidden: int, repeats: int) -> None:
    trace = solve_trace(hidden)
    floats = sum(trace.sizes)
    cpu = load_hierarchy("cpu")
    _, t = paired_times({"dmd": dmd, "energy": lambda tr: level_counts(tr, cpu)}, trace, repeats, {})
    t_dmd, t_energy = statistics.median(t["dmd"]), statistics.median(t["energy"])
    print(f"\nwhole-solve SGD trace, n=20, H={hidden}: {len(trace):,} events, {floats:,} float accesses")
    print(f"{'pass':<28} {'floats/s':>14}")
    print(f"{'dmd (reads observed)':<28} {floats / t_dmd:>14,.0f}")
    print(f"{'energy (LRU, all levels)':<28} {floats / t_energy:>14,.0f}")
    print(f"energy / dmd throughput: {spread(ratios(t['dmd'], t['energy']))} (target >= 1.0x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--solve-hidden", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3, help="paired timings of the two passes")
    args = ap.parse_args()
    print(f"{'trace':<28} {'elements':>10} {'splay el/s':>12} {'sweep el/s':>13}  {'DMD':>12}  speed, sweep / splay")
    for label, steps in (
        (f"1 standard step, H={args.hidden}", 1),
        (f"{args.steps} standard steps, H={args.hidden}", args.steps),
    ):
        trace = step_trace(args.hidden, steps)
        elements = sum(trace.sizes)
        v, t = paired_times({"splay": splay_dmd, "sweep": dmd}, trace, args.repeats, {"splay": 0.0})
        assert math.isclose(v["splay"], v["sweep"], rel_tol=1e-9), v
        t_ref, t_got = statistics.median(t["splay"]), statistics.median(t["sweep"])
        print(
            f"{label:<28} {elements:>10,} {elements / t_ref:>12,.0f} {elements / t_got:>13,.0f}  {v['sweep']:>12,.1f}  "
            f"{spread(ratios(t['splay'], t['sweep']), 0)}"
        )
    energy_vs_dmd(args.solve_hidden, args.repeats)


if __name__ == "__main__":
    main()
