"""`python -m sweep.ui`: the MLflow UI on the project's store, bound to 127.0.0.1 (this machine only).

It runs MLflow's own server (`mlflow ui --backend-store-uri <store> --host 127.0.0.1 --port <port>`) with one
worker: a single-user local UI needs no more, and each extra worker costs seconds of start-up and memory.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Sequence

# MLflow 3 opens an experiment on its GenAI (traces) pages unless the URL asks for the model-training workflow,
# which has the runs table: sweep's runs are model training.
RUNS_VIEW = "#/experiments?workflowType=machine_learning"


def command(tracking_uri: str, host: str = "127.0.0.1", port: int = 5000, workers: int = 1) -> list[str]:
    """The server command line (also what the browser test starts)."""
    return [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", tracking_uri, "--host", host,
            "--port", str(port), "--workers", str(workers)]


def runs_url(host: str, port: int, experiment_id: str | None = None) -> str:
    """The UI page with the runs table: the experiments list, or one experiment's runs."""
    if experiment_id is None:
        return f"http://{host}:{port}/{RUNS_VIEW}"
    return f"http://{host}:{port}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"


def main(argv: Sequence[str] | None = None) -> int:
    from sweep.paths import default_tracking_uri

    ap = argparse.ArgumentParser(prog="python -m sweep.ui", description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1; another address exposes the store")
    ap.add_argument("--tracking-uri", default=None, help="default: the project's store or $MLFLOW_TRACKING_URI")
    a = ap.parse_args(argv)
    uri = a.tracking_uri or default_tracking_uri()
    if uri.startswith("sqlite:///") and not os.path.exists(uri[len("sqlite:///"):]):
        print(f"sweep.ui: no store at {uri} yet: run a job first (python -m sweep)", file=sys.stderr)
        return 1
    print(f"MLflow UI on {runs_url(a.host, a.port)} (store {uri}); Ctrl-C stops it", flush=True)
    try:
        return subprocess.call(command(uri, a.host, a.port))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
