"""The proxy study's CPU ground truth (issue 42): every proxy against the cache misses of the solve as it runs,
from valgrind's cache simulator. Resumes; writes docs/results/proxy_study/cachegrind-<date>.csv.

    python benchmarks/proxy_cachegrind.py --budget-s 900      then   sweep-compare proxy_study
"""

import sys

from sweep.proxy_study.ground_truth import main

if __name__ == "__main__":
    sys.exit(main())
