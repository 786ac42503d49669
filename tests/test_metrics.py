"""The metric registry: one description of each compared metric (label, format, order), read by the compare
table, the plots, a run's one-line summary and the MLflow UI's columns."""

from __future__ import annotations

from sweep import metrics
from sweep.report import ui
from sweep.report.plots import plot_default
from sweep.report.table import Stat
from sweep.result import RunResult
from tests.conftest import run_sweep


def test_every_view_takes_its_metrics_from_the_registry_in_registry_order():
    names = [m.name for m in metrics.REGISTRY]
    assert len(names) == len(set(names))
    for view in (metrics.TABLE, metrics.LINE, metrics.PLOT, metrics.UI, ui.COLUMNS):
        assert list(view) == [n for n in names if n in view]
    assert set(ui.COLUMNS) == {"accuracy", "ard", "energy_pj", "wall_clock_s", "cost_usd"}


def test_the_table_cell_and_the_summary_line_use_the_registered_formats():
    assert Stat(1234.56, 10.2, 3).fmt("ard") == "1,235 ± 10"
    assert Stat(0.98765, 0.0, 1).fmt("accuracy") == "0.988"
    assert Stat(0.5, 0.0, 1).fmt("not_registered") == "0.5"  # the default format
    r = RunResult(
        config={"problem": {"seed": 1}},
        tags={"method": "sgd", "variant": "standard", "device": "cpu"},
        metrics={"cost_usd": 0.001234, "accuracy": 1.0, "ard": 1234.56, "epochs": 3.0, "dmd": 5.0},
    )
    assert r.summary() == "[FINISHED] sgd-standard-cpu-seed1 accuracy=1.000 epochs=3 ard=1,234.6 cost_usd=$0.00123"


def test_a_runs_line_shows_its_trackers_own_figure(store, tmp_path):
    """Under tracker=dmd, bytedmd or cache the line showed ard (every tracker logs it): it shows the tracker's own
    figure, in a sweep's lines (the results kept after recording) and a single run's "already recorded" line."""
    p = run_sweep("-m", "method=gf2", "problem.n_bits=10", "tracker=ard,dmd,bytedmd,cache,energy", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = {ln.split()[1]: ln for ln in p.stdout.splitlines() if ln.startswith("[FINISHED]")}
    own = {"ard": "ard=", "dmd": "dmd=", "bytedmd": "bytedmd=", "cache": "cache_hit_rate=", "energy": "energy_pj="}
    assert set(lines) == {f"tracker={t}" for t in own}, p.stdout
    for tracker, figure in own.items():
        shown = {f for f in own.values() if f" {f}" in lines[f"tracker={tracker}"]}
        assert shown == {figure}, lines[f"tracker={tracker}"]
    again = run_sweep("method=gf2", "problem.n_bits=10", "tracker=bytedmd", "mlflow.experiment=single", cwd=tmp_path)
    again = run_sweep("method=gf2", "problem.n_bits=10", "tracker=bytedmd", "mlflow.experiment=single", cwd=tmp_path)
    assert "already recorded" in again.stdout and " bytedmd=" in again.stdout and " ard=" not in again.stdout


def test_labels_come_from_the_registry_and_fall_back_to_the_name():
    assert metrics.label("wall_clock_s") == "wall-clock (s)"
    assert metrics.label("custom_metric") == "custom_metric"
    assert plot_default.__module__ == "sweep.report.plots"  # the plots read metrics.PLOT for their default panels
