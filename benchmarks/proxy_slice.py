"""The proxy study's next slice on the GPU at hand (issue 42), in at most 8 minutes; resumes where the last slice
stopped and appends to docs/results/proxy_study/<gpu-model>-<date>.csv (commit the file). Without a GPU, the CPU arm.

    python benchmarks/proxy_slice.py                 then   sweep-compare proxy_study
"""

import sys

from sweep.proxy_study.slice import main

if __name__ == "__main__":
    sys.exit(main())
