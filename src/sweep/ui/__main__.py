"""`python -m sweep.ui [study]`: the command's name; the MLflow UI launcher lives in sweep.report.ui."""

from __future__ import annotations

import sys

from hydra_plugins.sweep_launcher.api import prog, starting

# the imports take seconds: a signal in them is one line and 128+n, not a traceback
with starting(str(prog("sweep.ui"))):
    from sweep.report.ui import main

if __name__ == "__main__":
    sys.exit(main())
