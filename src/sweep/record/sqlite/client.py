"""The part of MlflowClient a sweep's start and end use, over sqlite3, for a store `SqliteRunWriter` writes.

A sweep's launching process reads the store twice besides its runs: runs a killed launcher left RUNNING
(`sweep.record.abandoned`) and, for its last line, the study's runs and view (`sweep.report.ui.next_steps`).
Through MLflow's client both cost its seconds of imports; here they are plain queries on the tables MLflow made,
returning objects shaped like MLflow's (``run.info.run_id``, ``run.data.tags``...) so the same report code reads
either. Only the filters the project writes are understood (``tags.`key` = 'value'``,
``attributes.status = 'value'`` and ``attributes.run_id IN ('id', ...)``, joined by ``and``); anything else
raises ValueError rather than guess.

tests/test_sql_client.py checks the runs and experiment tags written this way read back through MlflowClient
exactly as when MLflow wrote them.
"""

from __future__ import annotations

import math
import re
import sqlite3
import time
from types import SimpleNamespace
from typing import Any, Optional

from sweep.record.sqlite.writer import SqliteRunWriter

_CLAUSE = re.compile(r"^\s*(?:tags\.`([^`]+)`|attributes\.(status))\s*=\s*'([^']*)'\s*$")
_IDS = re.compile(r"^\s*attributes\.run_id\s+IN\s*\(((?:\s*'[0-9a-f]+'\s*,?)*)\)\s*$", re.IGNORECASE)
_CHUNK = 500  # within SQLite's limit on bound parameters


class Page(list):
    """One page of runs; `token` names the next (None: the last), as MLflow's PagedList does."""

    token: Optional[str] = None


class SqliteClient:
    """MlflowClient's get_run, get_experiment, search_runs, set_tag, set_terminated and set_experiment_tag for
    the writer's store and experiment."""

    def __init__(self, writer: SqliteRunWriter) -> None:
        self.writer = writer

    def _read(self) -> sqlite3.Connection:
        return self.writer._db()

    # -- reads ------------------------------------------------------------------------------------
    def get_experiment(self, experiment_id: str) -> Any:
        conn = self._read()
        row = conn.execute(
            "SELECT experiment_id, name, artifact_location, lifecycle_stage FROM experiments WHERE experiment_id = ?",
            (int(experiment_id),),
        ).fetchone()
        if row is None:
            raise LookupError(f"no experiment {experiment_id}")
        tags = dict(conn.execute("SELECT key, value FROM experiment_tags WHERE experiment_id = ?", (row[0],)))
        return SimpleNamespace(
            experiment_id=str(row[0]), name=row[1], artifact_location=row[2], lifecycle_stage=row[3], tags=tags
        )

    def search_experiments(self) -> list[Any]:
        """The active experiments of the workspace the writer's experiment is in."""
        ids = self._read().execute(
            "SELECT experiment_id FROM experiments WHERE lifecycle_stage = 'active' AND workspace = 'default' "
            "ORDER BY experiment_id"
        )
        return [self.get_experiment(str(i)) for (i,) in ids.fetchall()]

    def get_run(self, run_id: str) -> Any:
        runs = self._runs("r.run_uuid = ?", [run_id], "", [])
        if not runs:
            raise LookupError(f"no run {run_id}")
        return runs[0]

    def search_runs(
        self,
        experiment_ids: list[str],
        filter_string: str = "",
        max_results: int = 1000,
        page_token: Optional[str] = None,
    ) -> Page:
        """Active runs, newest first (MLflow's default order), a page of `max_results` at a time."""
        where = [f"r.experiment_id IN ({', '.join('?' * len(experiment_ids))})", "r.lifecycle_stage = 'active'"]
        args: list[Any] = [int(e) for e in experiment_ids]
        for clause in filter(None, re.split(r"\s+and\s+", filter_string.strip(), flags=re.IGNORECASE)):
            ids = _IDS.match(clause)
            if ids is not None:  # a sweep's runs skipped as done (sweep.report.queries.sweep_parts)
                listed = re.findall(r"'([0-9a-f]+)'", ids.group(1))
                where.append(f"r.run_uuid IN ({', '.join('?' * len(listed))})")
                args += listed
                continue
            m = _CLAUSE.match(clause)
            if m is None:
                raise ValueError(f"filter not understood here: {clause!r}")
            key, status, value = m.groups()
            if status:
                where.append("r.status = ?")
                args.append(value)
            else:
                where.append(
                    "EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = ? AND t.value = ?)"
                )
                args += [key, value]
        offset = int(page_token or 0)
        page = Page(self._runs(" AND ".join(where), args, " LIMIT ? OFFSET ?", [max_results + 1, offset]))
        if len(page) > max_results:
            del page[max_results:]
            page.token = str(offset + max_results)
        return page

    def _runs(self, where: str, args: list[Any], limit: str, limit_args: list[Any]) -> list[Any]:
        conn = self._read()
        rows = conn.execute(
            "SELECT r.run_uuid, r.name, r.experiment_id, r.user_id, r.status, r.start_time, r.end_time, "
            f"r.lifecycle_stage, r.artifact_uri FROM runs r WHERE {where} "
            f"ORDER BY r.start_time DESC, r.run_uuid{limit}",
            [*args, *limit_args],
        ).fetchall()
        runs = {}
        for rid, name, exp, user, status, start, end, stage, uri in rows:
            info = SimpleNamespace(
                run_id=rid,
                run_uuid=rid,
                run_name=name,
                experiment_id=str(exp),
                user_id=user,
                status=status,
                start_time=start,
                end_time=end,
                lifecycle_stage=stage,
                artifact_uri=uri,
            )
            runs[rid] = SimpleNamespace(info=info, data=SimpleNamespace(tags={}, params={}, metrics={}))
        ids = list(runs)
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i : i + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            for rid, key, value in conn.execute(
                f"SELECT run_uuid, key, value FROM tags WHERE run_uuid IN ({marks})", chunk
            ):
                runs[rid].data.tags[key] = value
            for rid, key, value in conn.execute(
                f"SELECT run_uuid, key, value FROM params WHERE run_uuid IN ({marks})", chunk
            ):
                runs[rid].data.params[key] = value
            for rid, key, value, is_nan in conn.execute(
                f"SELECT run_uuid, key, value, is_nan FROM latest_metrics WHERE run_uuid IN ({marks})", chunk
            ):
                runs[rid].data.metrics[key] = math.nan if is_nan else value
        return list(runs.values())

    # -- writes -----------------------------------------------------------------------------------
    def set_tag(self, run_id: str, key: str, value: str) -> None:
        self.writer.set_tag(run_id, key, value)

    def set_terminated(self, run_id: str, status: str = "FINISHED") -> None:
        self.writer.end_run(run_id, status, int(time.time() * 1000), [])

    def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        if str(experiment_id) != self.writer.experiment_id:
            raise ValueError(f"experiment {experiment_id} is not this store's {self.writer.experiment_id}")
        self.writer.set_experiment_tag(key, value)
