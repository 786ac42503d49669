"""sweep: experiment sweeps for energy-efficient learning research (sparse parity and friends)."""

import os

__version__ = "0.1.0"

# No network at run time: MLflow's usage telemetry (on by default outside CI) looks up and posts to
# mlflow-telemetry.io from `mlflow ui`, its tracking server and its client. Off in every command and the
# processes they start, unless the user has set it themselves.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
