"""The tags the project writes on MLflow runs and experiments: each name once, read by the recorder, the sweep
session, the reports (compare, ui) and resume."""

from __future__ import annotations

import re

METHOD_PARAM = "method.name"  # the param a run's method is recorded as (its config's, flattened)
HASH_TAG = "sweep.config_hash"  # a job's resolved config (resume: same hash, same result)
PARENT_TAG = "sweep.parent"  # "true" on a sweep's parent run
OVERRIDES_TAG = "sweep.overrides"  # the sweep's command-line overrides, on its parent (compare finds resumes)
SWEEP_DIR_TAG = "sweep.dir"  # the sweep's output directory, on its parent
# the sweep's `compare:` settings as it ran (its preset's node, then the command's compare.* overrides), JSON, on
# its parent: what sweep-compare and sweep-ui read, where they read the preset's file for a parent without it
COMPARE_TAG = "sweep.compare"
LAUNCHER_TAG = "launcher"  # the Hydra launcher that ran the sweep, on its parent
ROUTE_TAG = "sweep.route"  # where a job ran (local, modal, or another launcher's name)
JOB_NUM_TAG = "hydra.job.num"  # a job's number in its sweep (compare keeps the sweep's order)
PARENT_RUN_TAG = "mlflow.parentRunId"  # MLflow's own: a child run's parent
GIT_TAG = "git_commit"
TRACE_SOURCE_TAG = "sweep.trace_source"  # where a tracked run's trace came from: hand | auto (sweep.trace.source)
TRUNCATED_TAG = "sweep.params_truncated"  # params MLflow cut to its length limit (config.yaml has them whole)
KILLED_REASON_TAG = "sweep.killed_reason"
# on a parent run its launcher could not close (a full disk), closed later from the spool: why (sweep.record.spool)
ENDED_REASON_TAG = "sweep.ended_reason"
# who holds a parent run open: a re-run marks the run KILLED once that process is gone (sweep.record.abandoned)
HOST_TAG, PID_TAG, PROC_START_TAG = "sweep.launcher.host", "sweep.launcher.pid", "sweep.launcher.start"
SKIPPED_TAG = "sweep.skipped."  # + the job's number, on the parent: a job skipped as already done
# + 0, 1, ...: on the parent, the runs of the jobs it skipped as done, comma-separated: a sweep's runs are its
# children and these (a re-run whose jobs were all done is that sweep, not an older one with children)
DONE_RUNS_TAG, DONE_RUNS_PER_TAG = "sweep.done_runs.", 150
REFUSED_TAG = "sweep.refused."  # + the job's number, on the parent: "<job>: config error: ..." (no run)
# MLflow 3 opens an experiment of this kind on its runs table ("Model training"), not its GenAI pages
KIND_TAG, MODEL_TRAINING = "mlflow.experimentKind", "custom_model_development"
MODAL_GPU_TAG, MODAL_OFFLINE_TAG = "modal.gpu", "modal.offline"
REPEAT_OF_TAG = "sweep.repeat_of"  # on a single run recorded again (mlflow.force=true): the run it repeats
ORDER_TAG = "sweep.order"  # a run's name with its numbers zero-padded: the MLflow UI's runs table sorts on it
MIGRATED_TAG = "sweep.migrated_from"  # on a run copied by `sweep.store migrate`: "<source run id> <source store>"
# + a tracker's name: the version of that tracker's definition (TrackerBase.version) its figures on the run were
# computed with, on the run it was run with and on each run `sweep-rescore` scored with it later
TRACKER_VERSION_TAG = "sweep.tracker_version."
# on a run FAILED for running past the launcher's time limit (hydra.launcher.time_limit_s): the limit, in seconds
TIME_LIMIT_TAG = "sweep.time_limit_s"
# the scorer's code (sweep.challenge.scorer), on every run (a user's solver's source: sweep.methods.solver's tag)
SCORER_TAG = "sweep.scorer"
# a run solved in a batch (hydra.launcher.batch): the batch's id, and how many runs it solved together
BATCH_ID_TAG, BATCH_SIZE_TAG = "sweep.batch.id", "sweep.batch.size"
# which sweep runs a config (sweep.record.claims): a RUNNING parent's claim on a config hash (+ the hash; SQLite),
# the bookkeeping run holding the claims as params (other stores), and the tag naming that run on its pointer
CLAIM_TAG, CLAIMS_TAG, CLAIMS_RUN_TAG = "sweep.claim.", "sweep.claims", "sweep.claims_run"


def order_key(name: str) -> str:
    """ORDER_TAG's value: `name` with each number's integer part zero-padded, so text order is numeric order: t50 <
    t100, lr=0.05 < lr=0.1 (a fraction's digits already sort as text). Written with the run, so the UI's view needs
    no request per run to a tracking server."""
    return re.sub(r"(?<![.\d])\d+", lambda m: m.group().zfill(12), name)
