"""`python -m sweep.ui [study]`: the command's name; the MLflow UI launcher lives in sweep.report.ui."""

from __future__ import annotations

import sys

from sweep.report.ui import main

if __name__ == "__main__":
    sys.exit(main())
