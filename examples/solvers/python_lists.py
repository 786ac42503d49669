"""A solver that works in Python lists: the search of honest.py with the rows taken out of the arrays
(`tolist()`) and every parity computed by Python's own arithmetic. It finds the secret, and the trace sees only
the values leaving the arrays, not the work done with them: the run is flagged as work outside numpy."""

import itertools
import math


def solve(x, y, n_bits, k_sparse):
    rows, labels = x[:32].tolist(), y[:32].tolist()
    for subset in itertools.combinations(range(n_bits), k_sparse):
        if all(math.prod(row[i] for i in subset) == label for row, label in zip(rows, labels)):
            return list(subset)
    return []
