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
