"""The proxy ranking of `python -m sweep.compare` (sweep.energy.proxies): hand-computed rank correlations on runs
recorded in a real MLflow store, and a real energy sweep end to end (table, disagreements, scatter grid)."""

from __future__ import annotations

import json

import pytest

from sweep.energy.proxies import rank_proxies
from sweep.record.recorder import Recorder
from sweep.record.tags import COMPARE_TAG
from sweep.report import compare as cmpmod
from sweep.report.compare import compare
from sweep.report.queries import load_children
from sweep.result import RunResult
from tests.conftest import record_small_sweep

SPEC = {
    "target": ["energy_pj", "energy_measured_j"],
    "by": "tracker.hierarchy",
    "metrics": ["ard", "dmc", "total_floats"],
}


def test_rank_correlations_hand_computed(store):
    rec = Recorder(store, "proxies")
    parent = rec.start_parent("sweep sweeps=proxies", {"sweep.overrides": "sweeps=proxies", "launcher": "basic"})
    # energy 1..4; ard agrees, dmc is reversed, total_floats swaps the middle two runs
    for i, (ard, dmc, total) in enumerate([(1, 4, 1), (2, 3, 3), (3, 2, 2), (4, 1, 4)]):
        rec.log(
            RunResult(
                config={"tracker": {"hierarchy": "cpu"}, "extra": {"arm": f"a{i}"}},
                metrics={"energy_pj": float(i + 1), "ard": float(ard), "dmc": float(dmc), "total_floats": float(total)},
                tags={"method": "x"},
            ),
            parent_run_id=parent,
        )
    rec.end_parent(parent, "FINISHED", [])
    cmp, files = compare("proxies", store, log=False, settings={"proxies": SPEC})
    children = load_children(rec.client, rec.client.get_run(parent))
    [rk] = rank_proxies(children, SPEC["target"], SPEC["by"], SPEC["metrics"], keys=cmp.keys)
    assert (rk.group, rk.target, len(rk.points)) == ("cpu", "energy_pj", 4)  # no measured energy: no ranking
    assert rk.spearman["ard"] == pytest.approx(1.0) and rk.kendall["ard"] == pytest.approx(1.0)
    assert rk.spearman["dmc"] == pytest.approx(-1.0) and rk.kendall["dmc"] == pytest.approx(-1.0)
    # one swapped pair of four: rho = 1 - 6 * (1 + 1) / (4 * 15) = 0.8, tau = (5 - 1) / 6
    assert rk.spearman["total_floats"] == pytest.approx(0.8)
    assert rk.kendall["total_floats"] == pytest.approx(4 / 6)
    assert rk.best() == "ard"
    gaps = {pt.label: (rt, rp) for pt, rt, rp in rk.disagreements["total_floats"]}
    assert gaps == {"arm=a1": (2, 3), "arm=a2": (3, 2)}  # labelled by the swept keys; a0, ranked alike, is no gap
    assert rk.disagreements["ard"] == []  # was its first three runs, "(rank 1 by energy_pj, 1 by ard)"
    assert "ard vs energy_pj: no rank gaps: every run has its rank by energy_pj" in cmp.proxies
    assert "dmc vs energy_pj: largest rank gaps: arm=a0 (rank 1 by energy_pj, 4 by dmc)" in cmp.proxies
    assert "| cpu | energy_pj | 4 | Spearman | +1.000 | -1.000 | +0.800 |" in cmp.proxies
    assert {"proxies.md", "proxies-proxies.png"} <= {f.name for f in files}


def test_energy_sweep_ranks_proxies_and_logs_the_plot(store, tmp_path):
    rec, parent, _ = record_small_sweep(store, "energy_small", "energy_small", "tracker=energy", "tracker.meter=none")
    rec.end_parent(parent, "FINISHED", [])
    cmp, files = compare("energy_small", store, out_dir=tmp_path, settings={"proxies": SPEC})
    assert "| cpu | energy_pj | 4 | Spearman |" in cmp.proxies and "largest rank gaps" in cmp.proxies
    png = tmp_path / "energy_small-proxies.png"
    assert png in files and png.stat().st_size > 1000
    logged = {a.path for a in rec.client.list_artifacts(parent, "compare")}
    assert "compare/energy_small-proxies.png" in logged and "compare/proxies.md" in logged


def test_the_terminal_prints_the_ranking_table_with_its_rows_whole(store, capsys, monkeypatch):
    """The ranking is Markdown (for a findings note): on an 80-column pipe its rows were cut where the console
    wrapped them ("| total_floats | wall_clock_s |" on a line of its own), no table once pasted."""
    rec = Recorder(store, "proxies_wide")
    parent = rec.start_parent("sweep", {"sweep.overrides": "extra.arm=a0,a1,a2,a3", "launcher": "basic"})
    spec = {**SPEC, "metrics": ["ard", "dmc", "dmd", "bytedmd", "total_floats", "cache_miss_floats", "wall_clock_s"]}
    rec.client.set_tag(parent, COMPARE_TAG, json.dumps({"proxies": spec}))
    for i, (ard, dmc) in enumerate([(1, 4), (2, 3), (3, 2), (4, 1)]):
        metrics = {"energy_pj": float(i + 1), "ard": float(ard), "dmc": float(dmc), "total_floats": float(i)}
        config = {"tracker": {"hierarchy": "cpu"}, "extra": {"arm": f"a{i}"}}
        rec.log(RunResult(config=config, metrics=metrics, tags={"method": "x"}), parent_run_id=parent)
    rec.end_parent(parent, "FINISHED", [])
    monkeypatch.setenv("COLUMNS", "80")
    assert cmpmod.main(["proxies_wide", "--tracking-uri", store, "--no-log", "--no-plot"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("|") or ln.endswith("|")]
    assert len(rows) == 4 and all(ln.startswith("|") and ln.endswith("|") for ln in rows), rows  # head, ---, 2
    assert rows[0].endswith("| total_floats | cache_miss_floats | wall_clock_s |") and len(rows[0]) > 80
