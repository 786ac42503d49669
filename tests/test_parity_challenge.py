"""`sweeps=parity_challenge` end to end, then its leaderboard (`sweep-compare parity_challenge`): real sweeps into a
real store, the examples ranked or disqualified for their reasons, a round of another scorer left out; and a
user's solver batched by seed and run under Hydra's own launcher gives the same figures."""

from __future__ import annotations

import csv

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import run_sweep
from tests.forked_sweep import python_m

HONEST, BELOW, SLOW, LISTS = (
    f"examples/solvers/{n}.py:solve" for n in ("honest", "below_bar", "out_of_time", "python_lists")
)
SMT, GF2 = "sweep.challenge.references:smt", "sweep.challenge.references:gf2"


def runs_of(uri: str, experiment: str) -> tuple[list, list]:
    """(parents, children) of an experiment, the oldest first."""
    c = MlflowClient(uri)
    rs = c.search_runs([c.get_experiment_by_name(experiment).experiment_id], order_by=["attributes.start_time ASC"])
    return [r for r in rs if r.data.tags.get("sweep.parent")], [r for r in rs if not r.data.tags.get("sweep.parent")]


@pytest.mark.slow
def test_a_round_ranks_the_examples_and_disqualifies_them_for_their_reasons(store, tmp_path):
    # round 1, then marked as measured by an older scorer: its gf2 must not mix with round 2's entrants
    p = run_sweep("sweeps=parity_challenge", f"challenge.solvers=[{HONEST}]", f"challenge.references=[{GF2}]",
                  "challenge.seeds=1", cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr  # a flagged run is a finished run: the leaderboard judges it
    client = MlflowClient(store)
    _, first = runs_of(store, "parity_challenge")
    for r in first:
        client.set_tag(r.info.run_id, "sweep.scorer", "0ld5c0re0ld5c0re")
    raises = tmp_path / "raises.py"
    raises.write_text("def solve(x, y, n_bits, k_sparse):\n    raise ValueError('no idea')\n")
    solvers = f"challenge.solvers=[{BELOW},{SLOW},{LISTS},{HONEST},{raises}:solve]"
    p = run_sweep("sweeps=parity_challenge", solvers, f"challenge.references=[{SMT}]", "challenge.seeds=2",
                  "time_limit_s=3", cwd=tmp_path, timeout=600)  # fmt: skip
    assert p.returncode == 1, p.stderr
    assert "ran past the time limit of 3 s" in p.stderr
    parents, children = runs_of(store, "parity_challenge")
    assert parents[-1].data.params["launcher.time_limit_s"] == "3.0"
    # fresh seeds, recorded: two in round 2, none of them round 1's
    second = [r for r in children if r.data.tags["mlflow.parentRunId"] == parents[-1].info.run_id]
    seeds = {r.data.params["problem.seed"] for r in second}
    assert len(seeds) == 2 and not seeds & {r.data.params["problem.seed"] for r in first}
    assert len(second) == 6 * 2

    out = tmp_path / "board"
    env = {"COLUMNS": "80"}  # a pipe or a small terminal: every column kept, every figure whole
    shown = python_m("sweep.compare", "parity_challenge", "--out", str(out), cwd=tmp_path, env=env, timeout=300)
    assert shown.returncode == 0, shown.stderr
    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    by = {r["path"]: r for r in rows}
    passed = [r for r in rows if r["rank"]]
    assert {r["path"] for r in passed} == {HONEST, SMT}
    assert [float(r["dmd"]) for r in passed] == sorted(float(r["dmd"]) for r in passed)  # ranked by mean DMD
    assert by[BELOW]["disqualified_for"].startswith("accuracy: 0.")
    assert by[SLOW]["disqualified_for"] == "time: 2 of 2 seeds ran past 3 s"
    assert by[LISTS]["disqualified_for"] == "outside numpy: 672 values taken out of arrays into Python (allowed 20)"
    assert by[f"{raises}:solve"]["disqualified_for"] == (
        "error on 2 of 2 seeds: sweep.sandbox.EntrantFailed: raised ValueError: no idea (raises.py, line 2)"
    )
    assert GF2 not in by  # measured by another scorer: left out, and said so
    board = (out / "leaderboard.md").read_text()
    assert f"{GF2}: left out, its latest round (parent run {parents[0].info.run_id}) had another scorer" in board
    assert "smt (reference)" in shown.stdout and "disqualified" in shown.stdout
    heads = [line.split()[:3] for line in shown.stdout.splitlines() if line.startswith(("rank ", "entrant "))]
    assert heads == [["rank", "entrant", "runs"], ["entrant", "runs", "disqualified"]], shown.stdout
    # the disqualified's figures the terminal leaves out are said, not gone without a word
    assert "3 more columns of the disqualified with --wide, and in leaderboard.md / .csv" in shown.stdout
    for r in passed:  # each mean DMD whole, as the CSV has it
        assert f"{float(r['dmd']):,.0f}" in shown.stdout, (r["dmd"], shown.stdout)
    logged = {a.path for a in client.list_artifacts(parents[-1].info.run_id, "compare")}
    assert logged == {"compare/leaderboard.md", "compare/leaderboard.csv"}
    # and said, as a table's are (its line named the files alone); an entrant's path wraps after a separator
    assert f"(logged to run {parents[-1].info.run_id} under compare/)" in " ".join(shown.stdout.split())
    assert "python_lists.py:" in shown.stdout, shown.stdout


@pytest.mark.slow
def test_a_solver_batched_by_seed_equals_it_alone_and_under_hydras_launcher(store, tmp_path):
    grid = ["method=solver", f"method.path={HONEST},{LISTS}", "problem.seed=1,2,3", "tracker=dmd"]
    figures = {}
    for name, launch in (("batched", ["hydra.launcher.batch=3"]), ("basic", ["hydra/launcher=basic"])):
        p = run_sweep("-m", *grid, *launch, f"mlflow.experiment={name}", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        _, children = runs_of(store, name)
        figures[name] = {
            (r.data.params["method.path"], r.data.params["problem.seed"]): (
                *(r.data.metrics[m] for m in ("accuracy", "dmd", "escaped")), r.data.tags["secret_found"]
            )
            for r in children
        }  # fmt: skip
        if name == "batched":
            assert {r.data.tags["sweep.batch.size"] for r in children} == {"3"}
    assert figures["batched"] == figures["basic"] and len(figures["basic"]) == 6
