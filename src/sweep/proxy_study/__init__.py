"""Issue 42's study: which proxy predicts the Joules (a GPU's, by slices that accumulate in the repository) and the
cache misses (the CPU's, by cachegrind), with intervals and a fitted model
of the Joules (docs/results/proxy_study.md)."""
