"""sweep: experiment sweeps for energy-efficient learning research (sparse parity and friends)."""

import os

__version__ = "0.1.0"

# No network at run time: MLflow's usage telemetry (on by default outside CI) looks up and posts to
# mlflow-telemetry.io from `mlflow ui`, its tracking server and its client. Off in every command and the
# processes they start, by the cross-tool DO_NOT_TRACK, which MLflow honours (an MLFLOW_* variable would be one
# more in a sandboxed entrant's environment, which holds none), unless the user set either themselves.
if "MLFLOW_DISABLE_TELEMETRY" not in os.environ:
    os.environ.setdefault("DO_NOT_TRACK", "true")
