"""A solver out of time: it finds the secret as honest.py does, then keeps checking for two minutes. The
challenge allows 60 s a run: the launcher kills it at the limit and records the run FAILED for its time."""

import itertools
import time

import numpy as np


def solve(x, y, n_bits, k_sparse):
    subsets = np.array(list(itertools.combinations(range(n_bits), k_sparse)))
    fits = np.all(np.prod(x[:32][:, subsets], axis=2) == y[:32, None], axis=0)
    time.sleep(120)  # "to be sure"
    return subsets[np.argmax(fits)]
