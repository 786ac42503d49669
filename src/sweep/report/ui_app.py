"""The MLflow apps `python -m sweep.ui` serves (`mlflow server --app-name sweep`, an `mlflow.app` entry point) and
the group's server serves with logins (`sweep-auth`, over MLflow's basic-auth app):
MLflow's own server, whose page first writes what MLflow 3.17's UI keeps per browser, so that a click on a study
anywhere in MLflow's UI (its home page, its experiments list) opens the study's runs in a new browser too:

- the workflow type (localStorage `mlflow.workflowType_v1`): MLflow's sidebar toggle, which decides whether an
  experiment opens on its GenAI overview or on its runs whatever the experiment's `mlflow.experimentKind`, and
  which starts on GenAI in a browser that never set it. Set to model training on each load of the page: every
  experiment the project records is a model-training one (the toggle still switches within the page);
- each study's runs table (localStorage `MLflowLocalStorage-1.1-ExperimentPage-["<id>"]-ReactComponentState`,
  where MLflow keeps an experiment's columns, sort and search): the view `sweep.ui` wrote on the experiment
  (its shared view tag), written again only when that view changed, so what the user changes in the table stays
  until the study's next sweep.

The page is served only where MLflow serves it (same origin, same routes); the script runs before MLflow's
bundle reads the storage.
"""

from __future__ import annotations

import json
import os
from typing import Any

from sweep.report.ui import VIEW_KEY, VIEW_TAG_PREFIX

WORKFLOW_KEY, MODEL_TRAINING_WORKFLOW = "mlflow.workflowType_v1", "machine_learning"
TABLE_KEY = "MLflowLocalStorage-1.1-ExperimentPage-{ids}-ReactComponentState"  # MLflow's per-experiment state
APPLIED_KEY = "sweep.appliedView-{id}"  # the view last written into this browser's table state

_SCRIPT = """<script>(function(){try{var s=window.localStorage,views=%s;
s.setItem(%s,%s);
for(var id in views){var mark=%s.replace("{id}",id);if(s.getItem(mark)===views[id])continue;
s.setItem(%s.replace("{ids}",JSON.stringify([id])),views[id]);s.setItem(mark,views[id]);}
}catch(e){}})();</script>"""


def _views() -> dict[str, str]:
    """Each active experiment's view as `sweep.ui` wrote it (its shared view tag), by experiment id."""
    from mlflow.entities import ViewType  # noqa: PLC0415 - MLflow's server modules: loaded by the server that serves this app
    from mlflow.server.handlers import _get_tracking_store  # noqa: PLC0415 - MLflow's server modules: loaded by the server that serves this app

    store, views, token = _get_tracking_store(), {}, None
    while True:
        page = store.search_experiments(view_type=ViewType.ACTIVE_ONLY, max_results=1000, page_token=token)
        for e in page:
            if (view := e.tags.get(VIEW_TAG_PREFIX + VIEW_KEY)) is not None:
                views[e.experiment_id] = view
        token = page.token
        if not token:
            return views


def page_script(views: dict[str, str]) -> str:
    """The `<script>` the page starts with (JSON-escaped so no view can close the tag early)."""

    def js(value: Any) -> str:
        return json.dumps(value).replace("</", "<\\/")

    return _SCRIPT % (
        js(views),
        js(WORKFLOW_KEY),
        js(json.dumps(MODEL_TRAINING_WORKFLOW)),
        js(APPLIED_KEY),
        js(TABLE_KEY),
    )


def serve_views(flask_app: Any) -> None:
    """MLflow's page (its index.html, served for every UI route) served with `page_script` first."""
    from flask import Response  # noqa: PLC0415 - MLflow's server modules: loaded by the server that serves this app

    serve = flask_app.view_functions["serve"]

    def serve_with_views() -> Any:
        index = os.path.join(flask_app.static_folder, "index.html")
        if not os.path.exists(index):
            return serve()
        with open(index, encoding="utf-8") as f:
            html = f.read()
        html = html.replace("<head>", "<head>" + page_script(_views()), 1)
        return Response(html, mimetype="text/html", headers={"Cache-Control": "no-cache"})

    flask_app.view_functions["serve"] = serve_with_views


def create_app() -> Any:
    """MLflow's ASGI app (as `mlflow server` runs it under uvicorn) with its page served through `page_script`."""
    from mlflow.server import app as flask_app  # noqa: PLC0415 - MLflow's server modules: loaded by the server that serves this app
    from mlflow.server.fastapi_app import app  # noqa: PLC0415 - MLflow's server modules: loaded by the server that serves this app

    serve_views(flask_app)
    return app


def create_auth_app() -> Any:
    """The group's server (`sweep-server`, `mlflow server --app-name sweep-auth`): MLflow's basic-auth app (logins and
    permissions on every request, the page's included) with the same page, so that a click on a study in
    MLflow's own list lands on its runs there too."""
    from mlflow.server import app as flask_app  # noqa: PLC0415 - MLflow's server modules: loaded by the server that serves this app
    from mlflow.server.auth import create_app as basic_auth  # noqa: PLC0415 - MLflow's server modules: loaded by the server that serves this app

    app = basic_auth(flask_app)  # the Flask app under gunicorn (sweep-server's), FastAPI's under uvicorn
    serve_views(flask_app)
    return app
