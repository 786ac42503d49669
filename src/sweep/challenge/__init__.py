"""The group's sparse-parity challenge as the project runs it: a user's `solve(x, y, n_bits, k_sparse)` is
method=solver (sweep.methods.solver; its path, loaded and checked in a sandbox, sweep.methods.solver_path), traced
in its sandbox by the harness traced.py; the project's exact methods behind the same interface (references.py);
the scorer's identity (scorer.py); a round's entrants and fresh seeds are resolvers (sweep.config.resolvers).
docs/challenge.md says how they fit together."""
