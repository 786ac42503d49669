"""One sweep's recording, whichever launcher runs its jobs: the store, the parent run, resume (which jobs
already have a FINISHED run), each job's child run with its cost, and the parent's totals at the end.

Two thin adapters hold a session: the project's launcher hooks (`launch.hooks`, in the launching
process) and the Hydra callback (`launch.callback`, for Hydra's own launchers, submitit and single runs).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from sweep.challenge.scorer import this_scorer
from sweep.config.prices import cost_usd, device_price_per_hour
from sweep.config.schema import JOB_GROUPS
from sweep.config.view import job_config
from sweep.paths import default_tracking_uri
from sweep.record import claims
from sweep.record.abandoned import repair_abandoned
from sweep.record.background import BackgroundWriter
from sweep.record.recorder import Recorder, config_hash, shared_recorder
from sweep.record.registry import open_store
from sweep.record.sqlite.writer import MAX_TAG_LEN
from sweep.record.store import StoreError
from sweep.record.tags import COMPARE_TAG, KILLED_REASON_TAG, LAUNCHER_TAG, OVERRIDES_TAG, SCORER_TAG, SWEEP_DIR_TAG
from sweep.result import RunResult

# re-run jobs that already have a FINISHED run, under any launcher (the project's also has hydra.launcher.force)
FORCE_KEY = "mlflow.force"


def is_sweep_job(cfg: DictConfig) -> bool:
    return all(k in cfg for k in JOB_GROUPS)


def failed_result(
    job_cfg: DictConfig, exc: BaseException | None, status: str = "FAILED", error: str | None = None
) -> RunResult:
    """The record of a job that raised: its config, tags, and the traceback (logged as an artifact).

    `error`: the traceback as text, for a job that raised in another process (the exception's traceback
    does not travel with it)."""
    tb = error if error is not None else "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    tags = {g: str(OmegaConf.select(job_cfg, f"{g}.name", default="?")) for g in JOB_GROUPS}
    tags[SCORER_TAG] = this_scorer()  # a run that failed is judged too (a challenge's leaderboard)
    return RunResult(config=job_config(job_cfg), tags=tags, status=status, error=tb)


def bill(result: RunResult, seconds_key: str, seconds: float, price_per_hour: float) -> None:
    """What the job's whole task cost, known where it ran (the job's `cost_usd` prices its solve alone): the seconds
    it was billed for (a CPU host's CPU seconds, `cpu_s`; Modal's container seconds, `billed_s`) at their hourly
    price, as `task_cost_usd` (sweep.metrics)."""
    result.metrics[seconds_key] = seconds
    result.metrics["task_cost_usd"] = cost_usd(seconds, price_per_hour)


def bill_cpu(result: RunResult, cfg: DictConfig, cpu_s: float) -> None:
    """A job that ran on a CPU host (not a Modal GPU): its task's CPU seconds at device.price_per_hour."""
    price = device_price_per_hour(cfg.device) if OmegaConf.select(cfg, "device") is not None else 0.0
    bill(result, "cpu_s", cpu_s, price)


class SweepSession:
    """The store and the parent run of one multirun, and the results recorded under it."""

    def __init__(self) -> None:
        self.recorder: Optional[Recorder] = None
        self.parent: Optional[str] = None
        self.results: list[RunResult] = []
        self.unrecorded = 0  # results the store refused (kept in the spool)
        self.launching_pid: Optional[int] = None  # the process that opened the parent (and alone closes it)
        self.writer: Optional[BackgroundWriter] = None  # a tracking server's runs, written while the sweep goes on

    def __getstate__(self) -> dict[str, Any]:
        # travels with Hydra's context to a launcher's jobs (submitit): everything but the open store (an MLflow
        # client holds weak references; a job opens its own from mlflow.tracking_uri) and its writer's threads
        return {k: v for k, v in self.__dict__.items() if k not in ("recorder", "writer")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.recorder = None
        self.writer = None

    def store(self, config: DictConfig) -> Recorder:
        """This process's recorder for the config's store and experiment (opened on first use)."""
        if self.recorder is None:
            self.recorder = shared_recorder(config.mlflow.tracking_uri, config.mlflow.experiment)
        return self.recorder

    def open(
        self, config: DictConfig, multirun_cfg: DictConfig, launcher: str, params: dict[str, Any], fast: bool = False
    ) -> str:
        """The sweep's parent run (once per multirun): runs a killed launcher left RUNNING are marked KILLED
        first, before resume reads the store; named and tagged by the command line's overrides (compare finds a
        resumed sweep's earlier parents by them), with the launcher's name, the sweep's directory and the
        launcher's settings (`params`). `fast`: a long-lived launching process (the project's launcher): SQLite
        in WAL mode, a tracking server's runs written in the background (`record.background`; `flush` waits for
        them), and the objects loaded so far frozen out of the garbage collector's scans."""
        if self.parent is not None:
            return self.parent
        try:
            return self._open(config, multirun_cfg, launcher, params, fast)
        except StoreError:
            raise
        except Exception as e:  # noqa: BLE001 - the store failed while the sweep starts (a full disk): one line
            uri = str(config.mlflow.tracking_uri or default_tracking_uri())
            raise StoreError(uri, open_store(uri).explain(e)) from e

    def _open(
        self, config: DictConfig, multirun_cfg: DictConfig, launcher: str, params: dict[str, Any], fast: bool
    ) -> str:
        recorder = self.store(config)
        if fast:
            recorder.store.for_long_sweep(recorder.direct)
            gc.freeze()  # MLflow, Hydra and the composed configs stay: per-job collections need not rescan them
        repaired = repair_abandoned(recorder.store_client, recorder.experiment_id)
        if repaired:
            print(
                f"sweep: {len(repaired)} run(s) left RUNNING by a launcher that was killed are now KILLED "
                f"(tag {KILLED_REASON_TAG})",
                file=sys.stderr,
                flush=True,
            )
        overrides = " ".join(OmegaConf.to_container(multirun_cfg.hydra.overrides.task))
        self.parent = recorder.start_parent(
            f"sweep {overrides}".strip(),
            {
                OVERRIDES_TAG: overrides,
                LAUNCHER_TAG: launcher,
                SWEEP_DIR_TAG: str(Path(str(multirun_cfg.hydra.sweep.dir)).resolve()),
                **compare_settings(multirun_cfg),
            },
            params=params,
        )
        self.launching_pid = os.getpid()
        if fast and recorder.store.remote:  # each write a round trip: written while the sweep goes on
            self.writer = BackgroundWriter(recorder)
        return self.parent

    def done(self, config: DictConfig, configs: list[dict[str, Any]]) -> dict[str, str]:
        """Resume: config hash -> FINISHED run id, for the resolved job configs that already have one."""
        return self.store(config).finished(configs)

    def done_hashes(self, config: DictConfig, hashes: set[str]) -> dict[str, str]:
        """`done` by the configs' hashes (`config_hash`)."""
        return self.store(config).finished_hashes(hashes)

    def claim(self, config: DictConfig, hashes: set[str]) -> dict[str, str]:
        """Claim the configs `hashes` for this sweep (`sweep.record.claims`); returns those another sweep running
        now holds: hash -> its parent run's id. Raises StoreError (one line) when the store fails."""
        assert self.parent is not None
        try:
            return claims.claim(self.store(config), self.parent, hashes)
        except StoreError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever the store raised: one line, before any job
            uri = str(config.mlflow.tracking_uri or default_tracking_uri())
            raise StoreError(uri, f"the sweep's claims could not be taken: {open_store(uri).explain(e)}") from e

    def done_run(self, config: DictConfig, job_config: dict[str, Any]) -> Optional[str]:
        return self.done(config, [job_config]).get(config_hash(job_config))

    def mark(self, config: DictConfig, prefix: str, num: Any, value: str) -> None:
        """A note on the parent about a job that has no run: skipped (SKIPPED_TAG) or refused (REFUSED_TAG)."""
        if self.parent is not None:
            self.store(config).store_client.set_tag(self.parent, f"{prefix}{num}", value[:5000])

    def write(
        self, config: DictConfig, result: RunResult, run_name: Optional[str], tags: Optional[dict[str, str]] = None
    ) -> Optional[str]:
        """The job's child run: its id, or None when it is written in the background. Raises
        sweep.record.store.StoreError after keeping the result in the spool; in the background, at the next result
        handed over, once every result handed over is written or kept."""
        if self.writer is None:
            rid = self.store(config).log(result, parent_run_id=self.parent, run_name=run_name, extra_tags=tags)
            self.results.append(result)
            return rid
        self.writer.submit(result, self.parent, run_name, tags)
        self.results.append(result)
        refused = self.writer.failures()
        if refused:  # the sweep stops: what was handed over is written or kept first, the threads end
            refused += self.writer.close()
            self.writer = None
            self._not_recorded(refused[1:])
            self.unrecorded += 1
            raise refused[0]
        return None

    def flush(self) -> int:
        """Wait for the runs still being written; those the store refused (kept in the spool) are one line each on
        stderr and counted in `unrecorded`. Returns how many were refused."""
        if self.writer is None:
            return 0
        refused = self.writer.close()
        self.writer = None
        self._not_recorded(refused)
        return len(refused)

    def _not_recorded(self, refused: list[StoreError]) -> None:
        for e in refused:
            print(f"sweep: result not recorded: {e}", file=sys.stderr, flush=True)
        self.unrecorded += len(refused)

    def close(
        self, status: str, extra: Optional[dict[str, float]] = None, results: Optional[list[RunResult]] = None
    ) -> None:
        """The parent's totals (of `results`, default the ones recorded here) and its final status, once the runs
        still being written are (`flush`)."""
        self.flush()
        if self.recorder is not None and self.parent is not None:
            self.recorder.end_parent(self.parent, status, self.results if results is None else results, extra)

    def stored_children(self) -> tuple[Any, list]:
        """The parent run and its child runs as the store holds them (jobs of other processes included)."""
        assert self.recorder is not None and self.parent is not None
        return self.recorder.client.get_run(self.parent), self.recorder.children(self.parent)


def compare_settings(config: DictConfig) -> dict[str, str]:
    """The sweep's `compare:` settings as the parent's tag: those set (the preset's, the command's compare.*
    overrides), so that a `compare.metrics=[...]` given to the sweep is the one its `sweep-compare` hint shows."""
    node = config.get("compare")
    settings = {k: v for k, v in (OmegaConf.to_container(node, resolve=True) or {}).items() if v} if node else {}
    text = json.dumps(settings, sort_keys=True)
    return {COMPARE_TAG: text} if len(text) <= MAX_TAG_LEN else {}  # longer: the preset's file is read
