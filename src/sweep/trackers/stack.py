"""The element-level stack pass that DMD and the energy model both read (one pass, shared).

Every float is an element (buffer, index); an event touches its buffer's elements 0..size-1 in order. Elements
sit on a stack ordered by their last *touch*; what counts as a touch is the one difference between the users:

- DMD (``reads_move=False``): only writes touch; a read observes its elements' depths and moves nothing, and a
  never-written element has depth stack size + 1 (specs of the group's DMD).
- LRU (``reads_move=True``, the energy model): reads and writes both touch. The depth of an access is the
  number of distinct elements touched since that element's previous access, itself included (Mattson et al.
  1970: an LRU memory of capacity C serves exactly the accesses with depth <= C, so one pass serves every level
  of a hierarchy). A first touch has no depth: ``COLD``.

The pass works per *run* of elements, not per element, because events touch whole buffers:

- A touch event gives its elements consecutive stamps, and a later touch of the same buffer takes over a prefix
  0..s'-1 of it. So each touch event's still-live elements are a suffix of its index range, and a buffer's
  elements form a staircase of runs: the newest touch covers 0..s0-1, an older, longer one s0..s1-1, and so on
  (normally a single run).
- For a run (touch event e, indices lo..hi-1) with A live elements in the events after e, the element at index j
  has depth A + hi - j when nothing moves during the access (DMD: consecutive depths, step -1). When the access
  itself touches (LRU), the elements lo..j-1 it touched just before j also count, so every element of the run
  has the same depth A + hi - lo (step 0). Either way a run costs one Fenwick query.
"""
from __future__ import annotations

from typing import Iterator

from sweep.trackers.trace import READ, Trace

COLD = 0  # LRU depth of a first touch (real depths are >= 1)


class _Fenwick:
    """Prefix sums over touch-event ids (live element count per touch event)."""

    __slots__ = ("n", "tree", "total")

    def __init__(self, n: int) -> None:
        self.n = n
        self.tree = [0] * (n + 1)
        self.total = 0

    def add(self, i: int, delta: int) -> None:
        self.total += delta
        i += 1
        tree, n = self.tree, self.n
        while i <= n:
            tree[i] += delta
            i += i & -i

    def after(self, i: int) -> int:
        """Sum over ids > i."""
        s = 0
        i += 1
        tree = self.tree
        while i > 0:
            s += tree[i]
            i -= i & -i
        return self.total - s


def stack_runs(trace: Trace, reads_move: bool = False) -> Iterator[tuple[int, int, int, int]]:
    """The depths of the observed accesses, in trace order, as runs (event index, first depth, step, count):
    the run's elements, in index order, have depths first, first + step, ... (count of them).

    reads_move=False (DMD): reads are observed (step -1; never-written elements: stack size + 1, step 0).
    reads_move=True (LRU): every event is observed (step 0; first touches: depth COLD)."""
    n_touch = len(trace) if reads_move else sum(1 for op in trace.ops if op != READ)
    fw = _Fenwick(n_touch)
    stairs: dict[str, list[list[int]]] = {}  # buffer -> [[touch id, lo, hi], ...], newest (lowest index) first
    stack = 0  # distinct elements ever touched
    step = 0 if reads_move else -1
    ev = 0  # touch-event id
    for i, (op, name, size) in enumerate(trace):
        runs = stairs.get(name)
        if reads_move or op == READ:
            covered = 0
            if runs:
                for e, lo, hi in runs:
                    if lo >= size:
                        break
                    yield i, fw.after(e) + hi - lo, step, min(hi, size) - lo
                    covered = hi
            if size > covered:
                yield i, COLD if reads_move else stack + 1, 0, size - covered
            if op == READ and not reads_move:
                continue
        if size <= 0:
            ev += 1
            continue
        kept: list[list[int]] = [[ev, 0, size]]
        top = 0
        if runs:
            for run in runs:
                e, lo, hi = run
                top = hi
                if lo >= size:
                    kept.append(run)
                    continue
                cut = min(hi, size)
                fw.add(e, lo - cut)  # elements lo..cut-1 move to the new touch
                if cut < hi:
                    kept.append([e, cut, hi])
        stack += max(0, size - top)
        fw.add(ev, size)
        stairs[name] = kept
        ev += 1
