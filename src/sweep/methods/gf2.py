"""method=gf2: Gaussian elimination over GF(2) (seed 000/002).

A +-1 input bit x maps to a = (1 - x)/2 and the parity label y to b = (1 - y)/2, so b = a . s (mod 2) where
s is the secret's indicator vector; k odd or even makes no difference. The training rows are eliminated one
at a time until n_bits of them are independent (full rank): fewer rows leave the solution not unique (about
1 seed in 5 at n = 20 when stopping at n_bits + 1 rows), and a solver that ignored that would return a wrong
subset that still fits those rows. Back substitution then reads the secret off the echelon form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Iterator

import numpy as np

from sweep.config.fields import Rule, nonneg_int
from sweep.config.footprint import Term
from sweep.methods.base import SEEDS_ONLY, Context, MethodBase, Outcome, subset_outcome
from sweep.trace.auto.packed import WORD_BITS, load_rows
from sweep.trace.source import Recording, Source
from sweep.trace.trace import Trace

# as int8, +1 is the byte 0x01 and -1 the byte 0xff: a cast and a byte translation turn the rows into digit
# strings "0"/"1" (1 where the entry is -1) without a ufunc or any per-entry Python
BIT_DIGITS = bytes.maketrans(b"\x01\xff", b"01")


def pack_rows(x: np.ndarray, y: np.ndarray) -> Iterator[int]:
    """Each augmented row (a_0..a_{n-1} | b) of GF(2) bits, a = (1 - x)/2 and b = (1 - y)/2 for +-1 entries,
    as one Python int: bit j = a_j, bit n = b (read in base 2, so the row's digits go most significant first).
    The digits of the whole block are made at once; a row's int only when the elimination asks for it."""
    n = x.shape[1]
    a = x.astype(np.int8).tobytes().translate(BIT_DIGITS)
    b = y.astype(np.int8).tobytes().translate(BIT_DIGITS)
    return (int(b[i : i + 1] + a[i * n : (i + 1) * n][::-1], 2) for i in range(len(b)))


def packed_rows(r: Recording, x, y) -> Iterator[int]:
    """pack_rows under an automatic trace: the same ints, made by numpy operations the tracer sees (bits,
    packbits into 64-bit words, 0 + the row's words as one int) and kept as PackedInts, so the elimination's XORs
    on them are traced too (sweep.trace.auto.packed: one element of the trace is one 64-bit word)."""
    m, n = x.shape
    words = -(-(n + 1) // WORD_BITS)
    bits = np.zeros((m, WORD_BITS * words), dtype=bool)
    bits[:, :n] = x < 0  # bit j = a_j = (1 - x_j) / 2
    bits[:, n] = y < 0  # bit n = b
    octets = np.packbits(bits, axis=1, bitorder="little").astype(np.uint64).reshape(m, words, 8)
    # each row's words from its bytes (byte k of a word is its bits 8k..8k+7): no view across dtypes, so every
    # buffer is counted in its own elements (bits, bytes, then 64-bit words)
    rows = np.bitwise_or.reduce(octets << (8 * np.arange(8, dtype=np.uint64)), axis=2)
    r.rename(rows, "A")
    return load_rows(r.tracer, rows)


def insert_rows(basis: dict[int, int], rows: Iterable[int], n: int, trace: Trace) -> int:
    """Forward elimination, row by row: each row is reduced by the basis row owning its lowest set bit until
    that bit is new, and then joins the basis under it (basis: lowest set bit -> row, so every key is a
    pivot column). Stops at full rank; returns how many rows it used.

    A row XOR is one machine-word loop inside Python's int, so a row costs a few XORs: elimination is
    sequential by nature (seed 000: it runs on the CPU even in a GPU container), and on ints it beats a
    vectorised 0/1 matrix by orders of magnitude at every size, from n = 20 to n = 1000.
    """
    coeffs, used = (1 << n) - 1, 0
    words = -(-(n + 1) // WORD_BITS)  # a row is this many 64-bit words: the trace's unit (one element a word)
    for used, row in enumerate(rows, 1):
        trace.read("A", words)
        xors = 0
        while row:
            pivot = basis.get(row & -row)  # row & -row: the lowest set bit (bit n, b, is never a key)
            if pivot is None:
                break
            row ^= pivot
            xors += 1
        if xors:
            trace.read("basis", xors * words)
            trace.compute("xor", xors * words)
        if row & coeffs:  # else the row was a sum of basis rows: nothing new
            basis[row & -row] = row
            trace.write("basis", words)
            if len(basis) == n:
                break
    return used


def back_substitute(basis: dict[int, int], n: int) -> tuple[int, ...]:
    """The indices j with s_j = 1 in the solution of an echelon basis, solved highest pivot first: the row with
    pivot c reads s_c = b + sum of s_j over its other (higher) bits j, mod 2. Columns without a pivot are 0."""
    s, found = 0, []
    for c in sorted(basis, reverse=True):
        row = basis[c]
        if ((row & s).bit_count() + (row >> n)) & 1:
            s |= c
            found.append(c.bit_length() - 1)
    return tuple(reversed(found))


@dataclass
class GF2(MethodBase):
    problems: ClassVar[tuple[str, ...]] = ("sparse_parity",)  # only parity is linear over GF(2)
    vectorised: ClassVar[tuple[str, ...]] = SEEDS_ONLY  # batched as several runs in one task
    trace_source: ClassVar[str] = Source.AUTO.value  # tracker.source=method: its hand trace misses reads
    field_rules: ClassVar[tuple[Rule, ...]] = (
        Rule("method.max_rows", "an integer >= 0 (0: the whole training set)", nonneg_int),
    )

    name: str = "gf2"
    max_rows: int = 0  # 0: use up to the whole training set

    @classmethod
    def footprint(cls, cfg: Any) -> list[Term]:
        """The first 2 (n + 1) rows' digits (a byte a bit) and the basis (n Python ints of n + 1 bits)."""
        n = int(cfg.problem.n_bits)
        return [Term("rows and basis", 2 * (n + 1) * n + n * (n + 1) / 8, ("problem.n_bits",))]

    @classmethod
    def least_work(cls, cfg: Any) -> list[Term]:
        """n rows, each reduced by up to n basis rows of (n + 1) / 64 words."""
        n = int(cfg.problem.n_bits)
        return [Term("elimination", n * n * (n + 1) / 64, ("problem.n_bits",))]

    def solve(self, ctx: Context) -> Outcome:
        d, n = ctx.data, ctx.problem.n_bits
        limit = self.max_rows or d.x_train.shape[0]
        basis: dict[int, int] = {}
        used, words = 0, -(-(n + 1) // WORD_BITS)
        # the elimination runs on the host whatever the device (seed 000), so its automatic trace is numpy's
        with ctx.recording(backend="numpy") as r:
            trace = r.trace
            while len(basis) < n and used < limit:
                # 2 (n + 1) rows first: n + 1 fall short of full rank about 1 seed in 5 at n = 20, twice as many
                # about once in 10^7 (then twice as many again). Unused rows cost their digits, not their ints.
                stop = min(max(2 * used, 2 * (n + 1)), limit)
                trace.write("A", (stop - used) * words)
                x, y = r.load("x", d.x_train[used:stop]), r.load("y", d.y_train[used:stop])  # the rows read now
                rows = pack_rows(x, y) if r.tracer is None else packed_rows(r, x, y)
                used += insert_rows(basis, rows, n, trace)
            trace.read("basis", len(basis) * words)
            trace.compute("xor", len(basis) * words)  # back substitution: one AND (+ popcount) a row
            found = tuple(int(i) for i in back_substitute(basis, n))
        return subset_outcome(ctx.problem, d, found, rows_used=float(used), rank=float(len(basis)))
