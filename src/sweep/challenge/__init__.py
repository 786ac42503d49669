"""The group's sparse-parity challenge as the project runs it: a user's `solve(x, y, n_bits, k_sparse)` (load.py;
traced in its sandbox by traced.py), the project's exact methods behind the same interface (references.py), the
scorer's identity (scorer.py) and the fresh seeds of a round (round.py). docs/challenge.md says how they fit
together."""
