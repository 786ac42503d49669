"""`SqlRunWriter`: one finished run inserted in one transaction through the SQLAlchemy engine of MLflow's own store
object, with MLflow's own checks: any SQL database MLflow stores runs in, once MLflow is imported. The rows are
`sweep.record.sqlite.writer.run_rows`' (the sqlite3 writer's too); why a run is written this way is said there."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from sweep.record.sqlite.writer import ARTIFACTS_FOLDER, Metric, local_dir, run_rows


class SqlRunWriter:
    """Through the SQLAlchemy engine of MLflow's store object (MLflow already imported)."""

    direct = False  # MLflow's own engine: the rest of a sweep's writes go through MLflow's client

    def __init__(self, store: Any) -> None:
        self.store = store
        self._artifact_root: dict[str, str] = {}

    @classmethod
    def for_client(cls, client: Any) -> Optional["SqlRunWriter"]:
        """A writer for the client's store, or None when the store is not MLflow's SQLAlchemy store."""
        try:
            from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it
        except ImportError:  # pragma: no cover - depends on the installed MLflow
            return None
        store = getattr(getattr(client, "_tracking_client", None), "store", None)
        return cls(store) if isinstance(store, SqlAlchemyStore) else None

    def artifact_uri(self, experiment_id: str, run_id: str) -> str:
        from mlflow.utils.uri import append_to_uri_path  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it

        root = self._artifact_root.get(experiment_id)
        if root is None:
            root = self._artifact_root[experiment_id] = self.store.get_experiment(experiment_id).artifact_location
        return append_to_uri_path(root, run_id, ARTIFACTS_FOLDER)

    def artifact_dir(self, experiment_id: str, run_id: str) -> Optional[Path]:
        return local_dir(self.artifact_uri(experiment_id, run_id))

    @staticmethod
    def check(tags: dict[str, str], params: list[tuple[str, str]], metrics: list[Metric]) -> None:
        """MLflow's own checks of names and values (what log_batch would refuse), before anything is written."""
        from mlflow.entities import Metric as MMetric  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it
        from mlflow.entities import Param, RunTag  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it
        from mlflow.utils.validation import _validate_batch_log_data  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it

        _validate_batch_log_data(
            [MMetric(*m) for m in metrics], [Param(k, v) for k, v in params], [RunTag(k, v) for k, v in tags.items()]
        )

    def write(
        self,
        experiment_id: str,
        run_id: str,
        run_name: str,
        status: str,
        start_ms: int,
        end_ms: int,
        tags: dict[str, str],
        params: list[tuple[str, str]],
        metrics: list[Metric],
    ) -> None:
        """Insert the run, already terminated (call `check` first), in one Core transaction on the store's
        engine: no ORM session, no per-session PRAGMAs (~half the cost)."""
        from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric, SqlParam, SqlRun, SqlTag  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it

        tables = {
            "runs": SqlRun,
            "tags": SqlTag,
            "params": SqlParam,
            "metrics": SqlMetric,
            "latest_metrics": SqlLatestMetric,
        }
        rows = run_rows(
            experiment_id,
            run_id,
            run_name,
            status,
            start_ms,
            end_ms,
            tags,
            params,
            metrics,
            self.artifact_uri(experiment_id, run_id),
        )
        with self.store.engine.begin() as conn:
            for table, values in rows.items():
                if values:
                    conn.execute(tables[table].__table__.insert(), values)
