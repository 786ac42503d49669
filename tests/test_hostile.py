"""Issue 41's attacks on the challenge, each a small hostile solver (tests/hostile/attacks.py), run as entrants of
one `sweeps=parity_challenge` round beside honest ones, with bubblewrap and in the fallback: each is refused,
disqualified with its reason, or measured as the honest work it fell back to; no other entrant's figures change
(the leaderboard of the round equals the one of a round without them, minus them); nothing they start outlives
the round, whose exit code says it was broken. The attacks at load (module level) and a single run's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from sweep.methods.solver import SANDBOX_TAG
from sweep.paths import PROJECT_ROOT
from sweep.report.leaderboard import leaderboard
from sweep.report.queries import last_line
from sweep.sandbox import isolation
from tests.conftest import run_sweep
from tests.test_parity_challenge import BELOW, HONEST, SMT, runs_of

ATTACKS = "tests/hostile/attacks.py"
HOSTILE = "tests/hostile"
SEED = "problem.seed=7"  # both rounds on one seed: the same data, the same figures
RULES = ("compare.leaderboard", {"accuracy": 0.95, "time_limit_s": 5})  # 3 s: an honest search ran past it under load
# attack -> what becomes of it: a reason it is disqualified for, or "honest" (measured as the honest search it
# fell back to, having got nothing: the same DMD as honest.py)
BWRAP = {
    "patched_judge": "accuracy: 0.",
    "sql_update": "honest",
    "steal_env": "honest",
    "frames": "honest",
    "overrides": "honest",
    "fake_clock": "time: 1 of 1 seeds ran past 5 s",
    "view_escape": "honest",
    "base_escape": "honest",
    "thread_escape": "honest",
    "busy_flag": "honest",
    "busy_module": "untraced: on 1 of 1 seeds",
    "outlive": "untraced: on 1 of 1 seeds",
    "exit_in_solve": "error on 1 of 1 seeds: sweep.sandbox.EntrantFailed: raised SystemExit: 0",
    "os_exit_in_solve": "error on 1 of 1 seeds: sweep.sandbox.EntrantFailed: its process exited with code 0",
}
# the fallback keeps the process, the environment, the limits and the judging, not the filesystem's isolation:
# the attacks on the store's and Hydra's files are left out (docs/challenge.md)
FALLBACK = {k: v for k, v in BWRAP.items() if k not in ("sql_update", "overrides")}


def board(uri: str, experiment: str) -> dict[str, tuple]:
    """entrant -> (rank or None, its reasons, its mean accuracy, dmd, escaped) of the experiment's latest round."""
    client = MlflowClient(uri)
    parents, children = runs_of(uri, experiment)
    lb = leaderboard([(parents[-1], children)], RULES[1], lambda r: last_line(client, r), "parity_challenge", "x")
    out = {}
    for rank, e in [*enumerate(lb.passed, 1), *((None, e) for e in lb.out)]:
        out[e.path] = (rank, tuple(e.reasons), *(e.means.get(f) for f in ("accuracy", "dmd", "escaped")))
    return out


def hostile_sleepers() -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "hostile-sleep":
                out.append(int(pid))
        except OSError:
            pass
    return out


def round_of(attacks: dict[str, str], experiment: str, tmp_path: Path, **env: str):
    solvers = ",".join([HONEST, BELOW, *(f"{ATTACKS}:{a}" for a in attacks)])
    return run_sweep(
        "sweeps=parity_challenge", f"challenge.solvers=[{solvers}]", f"challenge.references=[{SMT}]", SEED,
        "time_limit_s=5", f"mlflow.experiment={experiment}", cwd=tmp_path, env=env, timeout=900,
    )  # fmt: skip


@pytest.mark.slow
def test_a_round_with_hostile_entrants_ranks_the_others_as_a_round_without_them(store, tmp_path):
    p = round_of({}, "clean", tmp_path)
    assert p.returncode == 0, p.stderr
    clean = board(store, "clean")
    assert clean[HONEST][0] == 1 or clean[SMT][0] == 1
    modes = {"hostile": (BWRAP, {})}
    if isolation.bwrap_missing():  # no bubblewrap here: the fallback is what runs, and is said so
        modes = {}
    modes["fallback"] = (FALLBACK, {isolation.ISOLATION_ENV: "process"})
    for experiment, (attacks, env) in modes.items():
        p = round_of(attacks, experiment, tmp_path, **env)
        assert p.returncode == 1, p.stderr  # entrants broke it: the round says so
        _, children = runs_of(store, experiment)
        assert {r.data.tags.get(SANDBOX_TAG) for r in children if r.info.status == "FINISHED"} == {
            "process" if env else "bwrap"
        }, p.stderr
        got = board(store, experiment)
        assert {k: got[k] for k in clean} == clean, experiment  # nobody else's figures or place changed
        for attack, fate in attacks.items():
            rank, reasons, _, dmd, _ = got[f"{ATTACKS}:{attack}"]
            if fate == "honest":
                assert rank is not None and dmd == clean[HONEST][3], (experiment, attack, reasons)
            else:
                assert rank is None and any(r.startswith(fate) for r in reasons), (experiment, attack, reasons)
        assert hostile_sleepers() == [], p.stderr  # the grandchild that ignores SIGTERM died with its sandbox


def test_attacks_at_load_are_refused_before_any_job_and_a_single_run_fails_loudly(store, tmp_path):
    for name, why, limit in (
        ("exits_on_load", "raised SystemExit: 0 (exits_on_load.py, line 3)", 30),
        ("loops_on_load", "took more than 6 s (stopped)", 6),
    ):  # the loop's limit: short, but more than a start on a loaded machine takes (honest.py is checked under it too)
        p = run_sweep("sweeps=parity_challenge", f"challenge.solvers=[{HONEST},{HOSTILE}/{name}.py:solve]",
                      "challenge.references=[]", f"method.load_limit_s={limit}", cwd=tmp_path)  # fmt: skip
        assert p.returncode == 2 and p.stdout == "", p.stderr
        (line,) = p.stderr.strip().splitlines()
        assert line.startswith("sweep: config error in job") and line.endswith(why), line
    p = run_sweep("method=solver", f"method.path={ATTACKS}:os_exit_in_solve", cwd=tmp_path)
    assert p.returncode != 0 and "its process exited with code 0" in p.stderr, p.stderr
    (run,) = MlflowClient(store).search_runs([MlflowClient(store).get_experiment_by_name("sweep").experiment_id])
    assert run.info.status == "FAILED"
    assert (PROJECT_ROOT / ATTACKS).is_file()
