"""`python -m sweep.ui [study]`: the MLflow UI on the project's store, bound to 127.0.0.1 (this machine only),
and the address that opens a study's runs.

It runs MLflow's own server (`mlflow ui --backend-store-uri <store> --host 127.0.0.1 --port <port>`) with one
worker and no job runner (SERVER_ENV): a single-user local UI of training runs needs no more, and each extra
process costs seconds of start-up and memory.

MLflow's own conventions make the study open on its runs:
- the experiment tag `mlflow.experimentKind = custom_model_development` (set on every experiment the project
  creates) marks it a model-training experiment. MLflow 3.17's UI, though, opens an experiment on the page of
  its workflow type: the address's `workflowType`, else the sidebar's GenAI / Model training toggle as last set
  in that browser (GenAI at first). The server runs as MLflow app `sweep` (sweep/report/ui_app.py), whose page sets the
  toggle and each study's runs table for the browser, so a click on a study anywhere in MLflow's UI lands on
  its runs, as the addresses printed here do;
- a shared view (MLflow's "Share" button): the experiment tag `mlflow.sharedViewState.<key>` holds the runs
  table's state, which the address loads with `viewStateShareKey=<key>`. The project's view shows the metric
  columns a study compares, sorted by run name with numbers in numeric order (the tag `sweep.order`: the name
  with its numbers zero-padded, so seed=7 < seed=42 < seed=100), and lists the runs of the study's latest sweep:
  its parent's children, or, for a sweep resumed under several parent runs, its runs by id (the latest run of
  each job, as `sweep.report.compare` reads it; MLflow's search has neither OR nor IN for tags), unless so many ids
  would not fit in the view's tag (then the newest parent's children).

The addresses are printed once the server answers (it imports MLflow's whole server first: seconds to tens of
seconds on a busy machine); a progress line shows meanwhile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from importlib.metadata import entry_points
from typing import Any, NamedTuple, Optional, Sequence
from urllib.parse import urlsplit

from hydra_plugins.sweep_launcher import api
from sweep import hosts
from sweep.arguments import Parser, summary
from sweep.hosts import bracketed
from sweep.metrics import UI
from sweep.paths import PROJECT_ROOT, default_tracking_uri
from sweep.record import address, remote, store, writes
from sweep.record.registry import open_store
from sweep.record.sqlite.writer import MAX_EXPERIMENT_TAG_LEN
from sweep.record.tags import KIND_TAG, MODEL_TRAINING, ORDER_TAG, PARENT_RUN_TAG, order_key
from sweep.report.owned_process import run_owned
from sweep.report.queries import children_filter, find_parent, has_runs, latest_sweeps, study_of, sweep_runs
from sweep.report.study import key_metrics, sweep_settings
from sweep.report.ui_wait import wait_until_serving

PROG = api.prog("sweep.ui")  # its one-line messages' first word

VIEW_TAG_PREFIX, VIEW_KEY = "mlflow.sharedViewState.", "sweep"
# the runs table's metric columns (those no run of the study logged are simply not shown)
COLUMNS = UI
HOST, PORT = "127.0.0.1", 5000
NAME_COLUMN = "attributes.`Run Name`"  # the runs table's column id for run names (MLflow 3.17)
APP_NAME = "sweep"  # the MLflow app (entry point in pyproject.toml) that serves sweep/ui_app.py
# MLflow's job runner (a third process importing MLflow, for GenAI jobs: online scoring, trace archival) slows
# the server's start on a small machine and serves nothing the runs need; a value the user set is kept
SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def command(tracking_uri: str, host: str = HOST, port: int = PORT, workers: int = 1) -> list[str]:
    """The server command line."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        tracking_uri,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--app-name",
        APP_NAME,
    ]


def ui_base(tracking_uri: str | None, host: str = HOST, port: int = PORT) -> str:
    """Where the UI of a store is: a tracking server serves its own; a local store's is what `sweep.ui` starts."""
    if tracking_uri is not None and open_store(tracking_uri).remote:
        # a login in the address (http://alice:pw@host) is not the page's: the browser asks for it
        parts = urlsplit(tracking_uri)
        return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl().rstrip("/")
    return f"http://{bracketed(host)}:{port}"


def runs_url(host: str = HOST, port: int = PORT, experiment_id: str | None = None, base: str | None = None) -> str:
    """The experiments list in the model-training view, or one experiment's runs in the project's view."""
    base = base or f"http://{bracketed(host)}:{port}"
    if experiment_id is None:
        return f"{base}/#/experiments?workflowType=machine_learning"
    return f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"


def run_url(experiment_id: str, run_id: str, host: str = HOST, port: int = PORT, base: str | None = None) -> str:
    """One run's page."""
    return f"{base or f'http://{bracketed(host)}:{port}'}/#/experiments/{experiment_id}/runs/{run_id}"


class Named(NamedTuple):
    """What the study's view reads of a run: a 50,000-job sweep's runs whole would be hundreds of MB."""

    run_id: str
    run_name: str
    order: Optional[str]
    parent_id: Optional[str]

    @classmethod
    def of(cls, r: Any) -> "Named":
        tags = r.data.tags
        return cls(r.info.run_id, r.info.run_name or "", tags.get(ORDER_TAG), tags.get(PARENT_RUN_TAG))


def study_columns(parent: Any, study: str) -> list[str]:
    """The runs table's metric columns: the sweep's key metrics (its `compare.metrics`: tiled_w1's cache hit rate),
    then the registry's UI columns (accuracy, ard, energy_pj, wall-clock, cost)."""
    return list(dict.fromkeys([*key_metrics(sweep_settings(parent, study)), *COLUMNS]))


# MLflow's chart view (its runs-compare state, shareable as the table's is): its "Model metrics" section marked
# reordered, so the charts given here come first and MLflow appends one for each other metric after them (not
# sorted by name, where a tracker's all-zero `DRAM_*` levels come first)
CHART_SECTION = "Model metrics"  # MLflow's section of a run's own metrics


def charts(metrics: Sequence[str]) -> dict[str, Any]:
    """The chart view's state: a bar chart per metric of `metrics`, in that order, first."""
    section = "sweep-model-metrics"
    card = {"type": "BAR", "runsCountToCompare": 10, "metricSectionId": section, "deleted": False, "isGenerated": True}
    return {
        "compareRunSections": [
            {"uuid": section, "name": CHART_SECTION, "display": True, "isReordered": True, "deleted": False}
        ],
        "compareRunCharts": [{**card, "uuid": f"sweep-{m}", "metricKey": m, "displayName": m} for m in metrics],
        "isAccordionReordered": False,
    }


def study_view(client: Any, parent: Any) -> None:
    """Write the study's view onto the experiment of sweep `parent` (a parent run): the model-training kind, the
    metric columns, and the runs list filtered to the sweep's runs (clearing the search shows every run)."""
    # a shared view cannot expand a run (MLflow drops runsExpanded): filter to the sweep
    runs = sweep_runs(client, parent, keep=Named.of)
    columns = study_columns(parent, study_of(parent, client.get_experiment(parent.info.experiment_id).name))
    state: dict[str, Any] = {
        "selectedColumns": [f"metrics.`{m}`" for m in columns],
        "searchFilter": children_filter(parent.info.run_id),
        **charts(columns),
    }
    # the name column wide enough for the jobs' names (what each varies), not cut to "method=gf2 probl…"
    width = min(600, max(180, 7 * max((len(r.run_name) for r in runs), default=0) + 60))
    state.update(columnOrder=[NAME_COLUMN], columnWidths={NAME_COLUMN: width})
    # sorted by name, not by date: MLflow nests children under their (collapsed) parent when sorting by date
    writes.tag_runs(client, {r.run_id: {ORDER_TAG: k} for r in runs if r.order != (k := order_key(r.run_name))})
    state.update(orderByKey=f"tags.`{ORDER_TAG}`", orderByAsc=True)
    if any(r.parent_id != parent.info.run_id for r in runs):  # resumed: every part
        ids = ", ".join(f"'{r.run_id}'" for r in runs)
        whole = {**state, "searchFilter": f"attributes.run_id IN ({ids})"}
        if len(json.dumps(whole)) <= MAX_EXPERIMENT_TAG_LEN:
            state = whole
    experiment_id = parent.info.experiment_id
    writes.tag_experiment(
        client, experiment_id, {KIND_TAG: MODEL_TRAINING, VIEW_TAG_PREFIX + VIEW_KEY: json.dumps(state)}
    )


def _store_args(tracking_uri: str) -> tuple[str, ...]:
    """A printed command's store: none for the default; an address without its password (a run's last line
    showed it in the clear), the environment's login completing it."""
    return () if tracking_uri == default_tracking_uri() else ("--tracking-uri", store.redacted(tracking_uri, ""))


def next_steps(client: Any, tracking_uri: str, experiment_id: str, parent_run_id: str) -> str:
    """The line a sweep ends with: how to compare it, and the address of its runs (view written here: on the
    sweep's runs, those of the jobs it skipped as done included; an earlier sweep's where it has none)."""

    parent = client.get_run(parent_run_id)
    study = study_of(parent, client.get_experiment(experiment_id).name)  # the name compare and ui look up
    if not has_runs(client, parent):
        try:
            parent = find_parent(client, study)
        except LookupError:
            pass
    try:
        study_view(client, parent)
    except Exception:  # noqa: BLE001 - sweeps ending at once on a server write the same tags: once more
        study_view(client, parent)
    store = _store_args(tracking_uri)
    compare, ui = (api.command(m, study, *store) for m in ("sweep.compare", "sweep.ui"))
    return (
        f"next: {compare}  ·  {ui}  →  {runs_url(experiment_id=parent.info.experiment_id, base=ui_base(tracking_uri))}"
    )


def run_hint(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """Where to see one run: the command that starts the UI, and the run's address in it."""
    url = run_url(experiment_id, run_id, base=ui_base(tracking_uri))
    if open_store(tracking_uri).remote:  # the server serves its UI: nothing to start
        return f"see it: {url}"
    return f"see it: {api.command('sweep.ui', *_store_args(tracking_uri))}  →  {url}"


def store_label(tracking_uri: str) -> str:
    """A store as a user finds it: its SQLite file (from the current directory where below it), else its address."""
    return open_store(tracking_uri).label()


def recorded_line(tracking_uri: str, experiment: str, experiment_id: str, run_id: str) -> str:
    """After a single run: where it was recorded (experiment, store) and how to look at it."""
    where = f"experiment {experiment!r} of {store_label(tracking_uri)}"
    return f"recorded in {where}; {run_hint(tracking_uri, experiment_id, run_id)}"


def main(argv: Sequence[str] | None = None) -> int:

    ap = Parser(PROG, prog=api.command("sweep.ui"), description=summary(__doc__))
    ap.add_argument(
        "study",
        nargs="?",
        default=None,
        help="a preset or experiment name (or a sweep's parent run id): print the address of its runs",
    )
    ap.add_argument("--port", type=int, default=PORT, help=f"default {PORT}; a taken port is one line: choose another")
    ap.add_argument("--host", default=HOST, help="default 127.0.0.1; another address exposes the store")
    ap.add_argument("--tracking-uri", default=None, help="default: the project's store or $MLFLOW_TRACKING_URI")
    a = ap.parse_args(argv)
    if not 1 <= a.port <= 65535:  # 99999 was socket's OverflowError traceback; 0, a port nobody is told of
        print(f"{PROG}: --port {a.port} is not allowed: a port from 1 to 65535", file=sys.stderr)
        return 2
    if (why := hosts.not_own(a.host)) is not None:  # was "--port 5000 on <host> is taken (...): choose another --port"
        print(f"{PROG}: --host {a.host} is not an address of this machine ({why}): {hosts.OWN}", file=sys.stderr)
        return 2
    uri = a.tracking_uri or default_tracking_uri()
    try:  # an address no store is at: exit 2; a server or database that does not answer: exit 1, in seconds
        address.check(uri)
    except address.BadAddress as e:
        print(f"{PROG}: store {store.redacted(uri)}: {e}", file=sys.stderr)
        return 2
    except store.StoreError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    target = open_store(uri)
    if target.remote:
        return on_server(uri, a.study)
    if not target.exists():
        print(f"{PROG}: no store at {uri} yet: run a job first ({api.command('sweep')})", file=sys.stderr)
        return 2  # as compare's and rescore's: most often a misspelt path

    if not entry_points(group="mlflow.app", name=APP_NAME):  # registered when the project is installed
        # the set-up command, as a path that works from here (`pip install -e .` only works at the root)
        setup = os.path.relpath(PROJECT_ROOT / ".ci" / "setup")
        print(
            f"{PROG}: MLflow app '{APP_NAME}' is not installed: set the project up again (bash {setup})",
            file=sys.stderr,
        )
        return 1
    try:  # a read-only store is read (and the study views, which write, are left out)
        target.check(write=True)
        writable = True
    except store.StoreError:
        writable = False
        print(f"{PROG}: store {uri} is read-only: shown without the studies' saved views", file=sys.stderr)
    view = study_view if writable else (lambda client, parent: None)
    client = target.client(write=writable)
    read = target.address(write=writable)  # what MLflow's server opens: read-only, where it must be
    url, studies = runs_url(a.host, a.port), []
    if a.study is not None:
        try:
            parent = find_parent(client, a.study)
        except LookupError as e:  # the user's own input first (exit 2), then the machine's port
            print(f"{PROG}: study: {e}", file=sys.stderr)
            return 2
    if (taken := hosts.port_taken(a.host, a.port)) is not None:  # at once, not after MLflow's server has started
        print(
            f"{PROG}: --port {a.port} on {a.host} is taken ({taken}): another MLflow UI? choose another --port",
            file=sys.stderr,
        )
        return 1
    if a.study is not None:
        view(client, parent)
        url = runs_url(a.host, a.port, parent.info.experiment_id)
    else:  # each study's own address: a click in MLflow's list opens the GenAI overview (see the module doc)
        for name, parent in latest_sweeps(client):
            view(client, parent)
            studies.append(f"  {name}: {runs_url(a.host, a.port, parent.info.experiment_id)}")

    stopped = threading.Event()  # our "stopped (SIGINT)" line, not uvicorn's shutdown lines before it

    def serving(proc: subprocess.Popen) -> int | None:  # the addresses once they open
        health = f"http://{bracketed(a.host)}:{a.port}/health"
        if (code := wait_until_serving(proc, health, str(PROG), stopped)) is None:
            print("\n".join([f"MLflow UI on {url} (store {uri}); Ctrl-C stops it", *studies]), flush=True)
        return code

    # SIGTERM or Ctrl-C stops all it started, also while it starts
    return run_owned(
        command(read, a.host, a.port),
        str(PROG),
        serving,
        stopped.set,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**SERVER_ENV, **os.environ},
    )


def on_server(uri: str, study: str | None) -> int:
    """A tracking server serves its own UI: write the studies' views there (where this login may) and print their
    addresses on it; nothing is started here."""
    try:
        remote.require(uri)
    except store.StoreError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    from mlflow.exceptions import MlflowException  # noqa: PLC0415 - MLflow: seconds to import, after the quick refusals

    client = open_store(uri).client()

    def view(parent: Any) -> None:
        try:
            study_view(client, parent)
        except MlflowException:  # a read-only login: the runs are shown without the study's saved view
            pass

    base = ui_base(uri)
    if study is not None:
        try:
            parent = find_parent(client, study)
        except LookupError as e:
            print(f"{PROG}: study: {e}", file=sys.stderr)
            return 2
        view(parent)
        print(f"MLflow UI of {uri}: {runs_url(experiment_id=parent.info.experiment_id, base=base)}")
        return 0
    lines = [f"MLflow UI of {uri}: {runs_url(base=base)}"]
    for name, parent in latest_sweeps(client):
        view(parent)
        lines.append(f"  {name}: {runs_url(experiment_id=parent.info.experiment_id, base=base)}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
