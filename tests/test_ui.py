"""`python -m sweep.ui` without a browser: the tags that make MLflow open a study on its runs, the address a
sweep ends with, and an unknown study refused in one line."""
from __future__ import annotations

import json

from mlflow.tracking import MlflowClient

from sweep import ui
from tests.conftest import record_small_sweep


def test_study_view_and_next_steps(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rec, parent, results = record_small_sweep(uri, "ui-tags", "ui_tags", "problem.n_bits=10", "tracker=none")
    rec.end_parent(parent, "FINISHED", results)
    line = ui.next_steps(rec.client, uri, rec.experiment_id, parent)
    assert line == (f"next: python -m sweep.compare ui-tags --tracking-uri {uri}  ·  python -m sweep.ui ui-tags "
                    f"--tracking-uri {uri}  →  http://127.0.0.1:5000/#/experiments/{rec.experiment_id}/runs"
                    "?workflowType=machine_learning&viewStateShareKey=sweep")
    tags = MlflowClient(uri).get_experiment(rec.experiment_id).tags
    assert tags[ui.KIND_TAG] == "custom_model_development"  # set when the recorder created the experiment
    view = json.loads(tags[ui.VIEW_TAG_PREFIX + ui.VIEW_KEY])
    assert view["searchFilter"] == f"tags.`mlflow.parentRunId` = '{parent}'"
    assert "metrics.`accuracy`" in view["selectedColumns"] and "metrics.`cost_usd`" in view["selectedColumns"]
    # the runs the view lists are the sweep's children
    listed = rec.client.search_runs([rec.experiment_id], filter_string=view["searchFilter"])
    assert {r.info.run_id for r in listed} == {r.run_id for r in results}

    assert ui.main(["no_such_study", "--tracking-uri", uri]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("sweep.ui")]  # MLflow logs too
    assert len(err) == 1 and err[0].startswith("sweep.ui: study: no sweep parent run found for 'no_such_study'")
