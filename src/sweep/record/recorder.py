"""The MLflow recorder: the one place that writes the store.

It takes RunResults (plain data) and writes one run each, in a single ``log_batch`` per run. A sweep is a
parent run with its jobs as child runs (``mlflow.parentRunId``). Only the launching process writes, so the
SQLite store never sees concurrent writers and remote jobs need no access to it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from typing import Any, Iterable, Optional

from sweep.paths import default_tracking_uri, git_commit
from sweep.record import address, artifacts, claims, earlier, spool, store
from sweep.record.abandoned import owner_tags
from sweep.record.answering import Answering
from sweep.record.registry import Store, open_store
from sweep.record.sqlalchemy_writer import SqlRunWriter
from sweep.record.sqlite.client import SqliteClient
from sweep.record.sqlite.writer import (
    MAX_PARAM_LEN,
    MAX_TAG_LEN,
    MLFLOW_RUN_NAME,
    SqliteRunWriter,
    new_run_id,
    plainly_valid,
)
from sweep.record.tags import (
    ENDED_REASON_TAG,
    GIT_TAG,
    HASH_TAG,
    KIND_TAG,
    MODEL_TRAINING,
    ORDER_TAG,
    PARENT_RUN_TAG,
    PARENT_TAG,
    TRUNCATED_TAG,
    order_key,
)
from sweep.result import RunResult, sweep_totals

RESUME_QUERY_MAX = 16  # up to this many configs, one query each; more: one pass over the experiment's runs


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'method': {'lr': 0.1}} -> {'method.lr': 0.1}"""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def config_hash(config: dict[str, Any]) -> str:
    """Identity of a job's resolved config: same hash, same result (resume uses it)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


@functools.cache
def shared_recorder(tracking_uri: str | None, experiment: str) -> "Recorder":
    """This process's one Recorder for a store and experiment: under Hydra's basic launcher and submitit a job's
    resume check and its recording (and, in the launching process, the parent run) share it, rather than
    opening the store (and reading its spool) again for each. A store that cannot be opened raises each time."""
    return Recorder(tracking_uri, experiment)


class Recorder:
    """Opens (or creates) the store and the experiment; raises `sweep.record.store.StoreError` (one line naming the
    store and the cause) when it cannot. Results spooled for this store are written in first (`sweep.record.spool`)."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = "sweep", import_spool: bool = True) -> None:

        self.tracking_uri = tracking_uri or default_tracking_uri()
        self.experiment = experiment
        # MLflow's SQL store logs each database error with its traceback before raising it (a PostgreSQL restarted
        # mid-sweep: 6 tracebacks, 230 lines); every write here says its error in one line (StoreError)
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
        try:  # an address no run is kept at, a server or database that does not answer: where MLflow would
            address.check(self.tracking_uri)  # keep nothing, fail after the job or retry for minutes
        except address.BadAddress as e:
            raise store.StoreError(self.tracking_uri, str(e)) from None
        self.store: Store = open_store(self.tracking_uri)
        self.store.check(write=True)  # milliseconds, where MLflow would retry for minutes
        self.store.create()  # a new SQLite store: made aside, renamed into place when whole

        self._client: Any = None
        self.answering = Answering()  # a tracking server that stopped answering: asked once, not at each write
        self._took: list[earlier.Took] = []  # of the runs resume read through MLflow's client (earlier_seconds)
        # a store written without importing MLflow (seconds saved): an SQLite store at the known schema
        self.sql: Any = self.store.direct_writer(experiment)
        if self.sql is not None:
            self.experiment_id = self.sql.experiment_id
        else:
            try:
                self.experiment_id = self._experiment(experiment)
            except store.StoreError:
                raise
            except Exception as e:  # noqa: BLE001 - whatever MLflow or SQLAlchemy raise: one line, no traceback
                raise store.StoreError(self.tracking_uri, self.store.explain(e)) from e
            self.sql = self.store.run_writer(self.client, experiment)
        self.store.close_at_exit(self.direct)
        self._file = self.store.file_of()  # a store file removed or replaced later: `_still_there` says so
        if import_spool:
            n = spool.import_into(self)
            if n:
                print(f"sweep: {n} spooled result(s) written into {self.tracking_uri}", flush=True)

    @property
    def direct(self) -> Optional[SqliteRunWriter]:
        """The run writer when it needs no MLflow (sqlite3): the sweep's start, claims, end and resume go through
        it too; None where MLflow's client makes them."""
        return self.sql if self.sql is not None and self.sql.direct else None

    @property
    def client(self) -> Any:
        """MLflow's client for this store, created on first use (importing MLflow costs seconds)."""
        if self._client is None:
            self._client = self.store.client()
        return self._client

    @property
    def store_client(self) -> Any:
        """The store's reads and tags as the sweep's start and end make them (`SqliteClient`'s methods): through
        sqlite3 where the runs are (an existing SQLite store at the known schema: no MLflow import), else
        MLflow's client."""
        if self.direct is not None:
            return SqliteClient(self.direct)
        return self.client

    def _experiment(self, name: str) -> str:
        exp = self.client.get_experiment_by_name(name)
        if exp is not None and exp.lifecycle_stage != "active":
            raise store.StoreError(self.tracking_uri, store.deleted_experiment(name, exp.experiment_id))
        if exp is not None:
            return exp.experiment_id
        location = self.store.artifact_location()
        try:
            return self.client.create_experiment(name, artifact_location=location, tags={KIND_TAG: MODEL_TRAINING})
        except Exception:  # noqa: BLE001 - two machines' first sweeps at once: the other one made it first
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    # -- runs -------------------------------------------------------------------------------------
    def log(
        self,
        result: RunResult,
        parent_run_id: str | None = None,
        run_name: str | None = None,
        extra_tags: dict[str, str] | None = None,
        at_once: bool = True,
    ) -> str:
        """Write one job's run; returns its id. A run the store refuses is kept in the spool, then StoreError
        says where (the result is saved or the command fails loudly, never both lost and silent). `at_once`: a
        tracking server's requests for the run (its batch, its files) made at once, not in turn."""

        try:
            self.answering.check()
            rid = self.write(result, parent_run_id, run_name, extra_tags, at_once)
            self._still_there()
            return rid
        except Exception as e:  # noqa: BLE001 - any failure to write: keep the result, say why in one line
            cause = self.answering.cause(e, self.store.explain)
            partial = getattr(e, "partial_run_id", None)
            where = spool.keep(
                result, self.tracking_uri, self.experiment, cause, parent_run_id, run_name, extra_tags, partial
            )
            raise store.StoreError(self.tracking_uri, f"{cause}; {where}") from e

    def write(
        self,
        result: RunResult,
        parent_run_id: str | None = None,
        run_name: str | None = None,
        extra_tags: dict[str, str] | None = None,
        at_once: bool = True,
    ) -> str:
        """Write one job's run (params, metrics with per-epoch steps, tags, artifacts); returns its id."""

        tags = {**result.tags, **(extra_tags or {}), HASH_TAG: config_hash(result.config), GIT_TAG: git_commit()}
        if parent_run_id:
            tags[PARENT_RUN_TAG] = parent_run_id
        name = run_name or result.short_name()
        tags[ORDER_TAG] = order_key(name)
        now = int(time.time() * 1000)
        flat = {k: str(v) for k, v in flatten(result.config).items()}
        params = [(k, v[:MAX_PARAM_LEN]) for k, v in flat.items()]
        cut = [f"{k} ({len(v)} characters)" for k, v in flat.items() if len(v) > MAX_PARAM_LEN]
        if cut:  # MLflow keeps 6,000 characters of a param: say which were cut (config.yaml has them whole)
            tags[TRUNCATED_TAG] = ", ".join(cut)[:MAX_TAG_LEN]
        metrics = [(k, float(v), now, 0) for k, v in result.metrics.items()]
        for key, values in result.curves.items():
            metrics += [(key, float(v), now, i + 1) for i, v in enumerate(values)]
        files = {**result.artifacts, **({"traceback.txt": result.error} if result.error else {})}
        start = int(result.start_time * 1000) if result.start_time else now
        end = int(result.end_time * 1000) if result.end_time else now  # (RunResult.end_time: a run of a batch's task)
        writer = self.sql
        if writer is not None and (not writer.direct or not plainly_valid(tags, params, metrics)):
            SqlRunWriter.check(tags, params, metrics)  # MLflow's own rules judge, and name, what is wrong
        if writer is not None:
            rid = new_run_id()
            self._write_artifacts(rid, files, writer)  # first: a run that is visible has its files
            writer.write(self.experiment_id, rid, name, result.status, start, end, tags, params, metrics)
        else:
            run = self.client.create_run(self.experiment_id, start, tags, name).info
            rid = run.run_id
            try:
                self._fill(rid, run.artifact_uri, result, params, metrics, files, at_once)
            except Exception as e:
                e.partial_run_id = rid  # type: ignore[attr-defined] - the spool's import deletes it (`log`)
                raise
        result.run_id = rid
        return rid

    def _fill(
        self, rid: str, artifact_uri: str, result: RunResult, params: list, metrics: list, files: dict, at_once: bool
    ) -> None:
        """A run MLflow's client made: its params, metrics, files and end."""
        from mlflow.entities import Metric, Param  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it

        params_e, metrics_e = [Param(k, v) for k, v in params], [Metric(*m) for m in metrics]
        # MLflow caps one batch at 1000 metrics / 100 params: chunk; params and metrics share each call
        calls = [
            functools.partial(
                self.client.log_batch,
                rid,
                params=params_e[i * 100 : (i + 1) * 100],
                metrics=metrics_e[i * 1000 : (i + 1) * 1000],
            )
            for i in range(max(-(-len(params) // 100), -(-len(metrics) // 1000), 1))
        ]
        self._write_artifacts(rid, files, None, calls, artifact_uri, at_once)
        end = int(result.end_time * 1000) if result.end_time else None  # (None: MLflow's now)
        self.client.set_terminated(rid, status=result.status, end_time=end)

    def _write_artifacts(
        self,
        run_id: str,
        files: dict[str, str],
        writer: Any,
        calls: list | None = None,
        artifact_uri: str = "",
        at_once: bool = True,
    ) -> None:
        """The run's files; `calls`: the run's other writes (log_batch), made alongside the uploads (`at_once`)
        or in turn. `artifact_uri`: the new run's, as the store answered its creation (MLflow's client would ask
        the store for the run again for each file)."""
        if not files and not calls:
            return
        local = writer.artifact_dir(self.experiment_id, run_id) if writer is not None and files else None
        if local is not None:  # the local artifact repository is this directory: write straight into it
            artifacts.write_into(local, files)
            return
        repository = functools.partial(self._artifact_repository, run_id, artifact_uri)
        artifacts.upload(repository, files, calls or [], at_once)

    def _artifact_repository(self, run_id: str, artifact_uri: str) -> Any:
        return artifacts.repository(artifact_uri or self.client.get_run(run_id).info.artifact_uri, self.tracking_uri)

    def start_parent(self, name: str, tags: dict[str, str], params: dict[str, Any] | None = None) -> str:
        """The sweep's parent run; a store that refuses it (a tracking server's reader) raises StoreError."""
        try:
            return self._start_parent(name, tags, params)
        except store.StoreError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever MLflow raises: one line, before any job
            raise store.StoreError(self.tracking_uri, store.cause_of(e)) from e

    def _start_parent(self, name: str, tags: dict[str, str], params: dict[str, Any] | None) -> str:
        owner = owner_tags()
        tags = {**tags, **owner, PARENT_TAG: "true", GIT_TAG: git_commit()}
        plain = [(k, str(v)[:MAX_PARAM_LEN]) for k, v in (params or {}).items()][:100]
        if self.direct is not None and plainly_valid({**tags, MLFLOW_RUN_NAME: name}, plain, []):
            rid = new_run_id()
            self.direct.start_run(rid, name, int(time.time() * 1000), tags, plain)
            return rid
        run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
        if plain:
            from mlflow.entities import Param  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it

            self.client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in plain])
        return run.info.run_id

    def end_parent(
        self, run_id: str, status: str, results: Iterable[RunResult], extra: dict[str, float] | None = None
    ) -> None:
        """The children's totals (`sweep.result.sweep_totals`) and the sweep's own figures (`extra`) on the parent run,
        then close it with `status`."""
        totals = {**(extra or {}), **sweep_totals(results)}
        try:
            self.answering.check()
            self._end_parent(run_id, status, totals)
        except Exception as e:  # noqa: BLE001 - a full disk: the end is kept, the next command into the store closes it
            cause = self.answering.cause(e, self.store.explain)
            closed = "FAILED" if status == "FINISHED" else status  # the command fails: its record says so
            where = spool.keep_end(self.tracking_uri, self.experiment, run_id, closed, totals, cause)
            raise store.StoreError(self.tracking_uri, f"{cause}; {where}") from e

    def close_spooled(self, end: dict[str, Any], cause: str) -> None:
        """A parent run's end kept in the spool (`spool.keep_end`): the run closed with it, the reason in
        ENDED_REASON_TAG; one the next sweep marked KILLED meanwhile (or already closed) is left as it is."""
        run_id = end["run_id"]
        if self.store_client.get_run(run_id).info.status != "RUNNING":
            return
        when = time.strftime("%Y-%m-%d %H:%M:%S")
        self.store_client.set_tag(
            run_id, ENDED_REASON_TAG, f"the launcher could not close this run: {cause}; closed from the spool at {when}"
        )
        self._end_parent(run_id, end["status"], end["metrics"])

    def _end_parent(self, run_id: str, status: str, totals: dict[str, float]) -> None:
        claims.release(self, run_id)  # a closed parent holds no config (on SQLite its claim tags go)
        now = int(time.time() * 1000)
        metrics = [(k, float(v), now, 0) for k, v in totals.items()]
        if self.direct is not None and plainly_valid({}, [], metrics):
            self.direct.end_run(run_id, status, now, metrics)
        else:
            from mlflow.entities import Metric  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it

            self.client.log_batch(run_id, metrics=[Metric(*m) for m in metrics])
            self.client.set_terminated(run_id, status=status)
        self._still_there()

    def _still_there(self) -> None:
        """The store is still the file this command opened: a SQLite file removed or replaced mid-sweep took every
        later write into the unlinked file, through MLflow's client as through sqlite3 ('24 done', exit 0)."""
        if why := self.store.moved(self._file):
            raise OSError(why)

    def children(self, parent_run_id: str, status: str | None = None) -> list:
        """The child runs of a parent run (of one `status`, if given)."""
        filt = f"tags.`{PARENT_RUN_TAG}` = '{parent_run_id}'"
        if status:
            filt = f"attributes.status = '{status}' and {filt}"
        return list(self.client.search_runs([self.experiment_id], max_results=50000, filter_string=filt))

    def finished_run(self, config: dict[str, Any]) -> str | None:
        """The id of a FINISHED run with this resolved config, if the store has one."""
        return self.finished([config]).get(config_hash(config))

    def finished(self, configs: list[dict[str, Any]]) -> dict[str, str]:
        """Resume: config hash -> the id of a FINISHED run with that resolved config, for those of `configs`
        the store has. A query per config for a few; for more, one pass over the finished runs (MLflow's
        search has no IN for tags)."""
        return self.finished_hashes({config_hash(c) for c in configs})

    def finished_hashes(self, wanted: set[str]) -> dict[str, str]:
        """`finished` by the configs' hashes (`config_hash`): a grid's jobs are checked one at a time and only
        their hashes kept."""
        if self.direct is not None:  # a single run's repeat check costs no MLflow import
            found = self.direct.finished(HASH_TAG, wanted)
            if found is not None:
                return found
        found = {}
        if len(wanted) <= RESUME_QUERY_MAX:
            for h in wanted:
                runs = self.client.search_runs(
                    [self.experiment_id],
                    max_results=1,
                    filter_string=f"tags.`{HASH_TAG}` = '{h}' and attributes.status = 'FINISHED'",
                )
                if runs:
                    found[h] = runs[0].info.run_id
                    self._took.extend(t for t in map(earlier.of_run, runs) if t)
            return found
        token = None
        while True:
            page = self.client.search_runs(
                [self.experiment_id], filter_string="attributes.status = 'FINISHED'", max_results=5000, page_token=token
            )
            self._took.extend(t for t in map(earlier.of_run, page) if t)  # a tuple each, not the run
            found.update(
                {r.data.tags.get(HASH_TAG): r.info.run_id for r in page if r.data.tags.get(HASH_TAG) in wanted}
            )
            token = page.token
            if not token:
                return found

    def earlier_seconds(self) -> list[earlier.Took]:
        """The seconds the experiment's earlier FINISHED job runs took, oldest first (`sweep.record.earlier`: an
        SQLite store's every one; another store's those resume read, no request more)."""
        if self.direct is not None:
            took = earlier.from_sqlite(self.direct.path, self.experiment_id)
            if took is not None:
                return took
        return sorted(self._took, key=lambda t: t.start_ms)
