"""docs/extending.md, "Add a store": its example kind, run as the page writes it, registers a scheme, and a run
recorded through it (the project's recorder, the kind's check, making and writer) is read back by MLflow's own
client from the file the kind names."""

from __future__ import annotations

import re

from sweep.paths import PROJECT_ROOT
from sweep.record import registry
from sweep.record.recorder import Recorder
from sweep.report.ui import store_label
from sweep.result import RunResult


def _example() -> str:
    page = (PROJECT_ROOT / "docs" / "extending.md").read_text()
    section = page.split("## Add a store", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_store_kind_records_a_run_mlflow_reads(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.setattr(registry, "_builders", dict(registry._builders))  # the registration undone afterwards
    monkeypatch.setenv("LAB_STORES", str(tmp_path / "lab"))
    exec(compile(_example(), "docs/extending.md", "exec"), {"__name__": "lab_store"})
    assert registry.known("lab") and type(registry.open_store("lab://team")).__name__ == "LabStore"

    rec = Recorder("lab://team", "demo", import_spool=False)
    result = RunResult(config={"method": {"name": "gf2"}}, metrics={"accuracy": 1.0}, tags={"method": "gf2"})
    run_id = rec.log(result)
    assert rec.direct is not None  # the SQLite kind's writer: no MLflow import to record it
    assert store_label("lab://team") == "lab://team"

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'lab' / 'team.db'}")
    run = client.get_run(run_id)
    assert run.data.metrics["accuracy"] == 1.0 and run.data.params["method.name"] == "gf2"
    assert client.get_experiment(run.info.experiment_id).name == "demo"
    assert not registry.known("nope")


def test_the_registry_picks_the_kind_by_the_uris_scheme(tmp_path):
    """MLflow's choice of store, by scheme (a driver after `+` does not change it), made in one place."""
    from sweep.record.kinds import DatabaseStore, ServerStore, SqliteStore

    db = tmp_path / "x.db"
    cases = {
        f"sqlite:///{db}": SqliteStore,
        f"sqlite+pysqlite:///file:{db}?mode=ro&uri=true": DatabaseStore,  # a read-only opening: MLflow's as given
        "postgresql+psycopg://u@h:5432/mlflow": DatabaseStore,
        "MySQL://h/db": DatabaseStore,
        "https://mlflow.example:443": ServerStore,
    }
    for uri, kind in cases.items():
        store = registry.open_store(uri)
        assert type(store) is kind and store.remote == (kind is ServerStore), uri
    sqlite = registry.open_store(f"sqlite:///{db}")
    assert sqlite.artifact_location() == (tmp_path / "artifacts").resolve().as_uri() and not sqlite.exists()
    assert registry.open_store("http://h:5000").artifact_location() is None
    assert sqlite.identity() == registry.open_store(f"sqlite:///{tmp_path}/../{tmp_path.name}/x.db").identity()
