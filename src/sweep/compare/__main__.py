"""`python -m sweep.compare <preset | parent run id>`: the command's name; the report lives in sweep.report."""

from __future__ import annotations

import sys

from sweep.report.compare import main

if __name__ == "__main__":
    sys.exit(main())
