"""An honest solver: every k-subset's parity on the first 32 rows, all in numpy; the subset that matches every
label is the secret (a wrong one matches 32 random labels with probability 2^-32)."""

import itertools

import numpy as np


def solve(x, y, n_bits, k_sparse):
    rows, labels = x[:32], y[:32]
    subsets = np.array(list(itertools.combinations(range(n_bits), k_sparse)))  # (C(n, k), k) candidate indices
    parities = np.prod(rows[:, subsets], axis=2)  # (32, C(n, k)): each subset's parity on each row
    fits = np.all(parities == labels[:, None], axis=0)
    return subsets[np.argmax(fits)]
