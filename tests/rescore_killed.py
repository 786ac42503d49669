"""`python -m tests.rescore_killed AT ARGS`: sweep-rescore ARGS, SIGKILLed where AT says: between a run's first and
second metric batch (batch2) or as it tags the run scored (tag). tests/test_rescore.py runs it forked."""

import os
import signal
import sys

from mlflow.tracking import MlflowClient

from sweep.record import writes
from sweep.rescore.__main__ import main

writes.METRICS_PER_BATCH = 2  # the run's few points in several batches, as a long curve's 1,000s are
real, at = MlflowClient.log_batch, sys.argv.pop(1)


def log_batch(self, *args, **kwargs):
    if at == "batch2" and getattr(self, "_batches", 0) == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    self._batches = getattr(self, "_batches", 0) + 1
    return real(self, *args, **kwargs)


real_tag = MlflowClient.set_tag


def set_tag(self, run_id, key, *args, **kwargs):
    if at == "tag" and key.startswith("sweep.tracker_version."):
        os.kill(os.getpid(), signal.SIGKILL)
    return real_tag(self, run_id, key, *args, **kwargs)


MlflowClient.log_batch, MlflowClient.set_tag = log_batch, set_tag
sys.exit(main(sys.argv[1:]))
