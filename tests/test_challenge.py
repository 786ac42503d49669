"""A user's solver as a method (method=solver): its path checked before any job, its solve run under the automatic
numpy trace with only the training data, the answer judged by the project; the scorer's hash; fresh seeds."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from sweep import job
from sweep.challenge.scorer import PACKAGE_DIR, scorer_hash, this_scorer
from sweep.config import resolvers as challenge_round
from sweep.config.check import check_job
from sweep.config.fields import SEED_MAX
from sweep.errors import ConfigError
from sweep.paths import CONF_DIR, PROJECT_ROOT
from tests.conftest import compose, run_sweep

EXAMPLES = PROJECT_ROOT / "examples" / "solvers"
SMALL = ("problem.n_bits=12", "problem.n_train=200", "problem.n_test=200")


def solver_file(tmp_path: Path, text: str, name: str = "mine.py") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def refusal(path: str, *overrides: str) -> str:
    with pytest.raises(ConfigError) as e:
        check_job(job.job_config(compose("method=solver", f"method.path={path}", *overrides)))
    return str(e.value)


def test_a_bad_path_is_one_line_naming_what_is_wrong(tmp_path):
    honest = EXAMPLES / "honest.py"
    assert refusal("honest.py") == (
        "method.path='honest.py' is not allowed: expected <file.py>:<function> or <package.module>:<function>,"
        " e.g. my_solver.py:solve"  # where the function's name goes: the form alone left a newcomer guessing
    )
    assert refusal(f"{EXAMPLES}/hnest.py:solve").startswith(f"method.path={EXAMPLES}/hnest.py:solve: no file")
    assert refusal(f"{EXAMPLES}/hnest.py:solve").endswith(f"(did you mean {honest}?)")
    assert refusal(f"{EXAMPLES}:solve") == (  # a folder: it said "no file", as if nothing were there
        f"method.path={EXAMPLES}:solve: {EXAMPLES} is a directory: expected <file.py>:<function> or "
        "<package.module>:<function>"
    )
    assert (
        refusal(f"{honest}:slove")
        == f"method.path={honest}:slove: {honest} has no function 'slove' (did you mean solve?)"
    )
    two = solver_file(tmp_path, "def solve(x, y):\n    return [0]\n")
    assert refusal(f"{two}:solve") == (
        f"method.path={two}:solve: solve(x, y) cannot be called as solve(x, y, n_bits, k_sparse): "
        "too many positional arguments"
    )
    broken = solver_file(tmp_path, "import numpy\nx = 1 / 0\n", "broken.py")
    assert refusal(f"{broken}:solve") == (
        f"method.path={broken}:solve: loading broken.py raised ZeroDivisionError: division by zero (broken.py, line 2)"
    )
    # issue 43, seventh round: a file of null bytes named importlib's line ("(<frozen importlib._bootstrap>, line
    # 241)"), a dangling link was "no file X (did you mean X?)", the link's own name
    binary = tmp_path / "binary.py"
    binary.write_bytes(b"\x00\x01def solve():\n")
    assert refusal(f"{binary}:solve") == (
        f"method.path={binary}:solve: loading binary.py raised SyntaxError: source code string cannot contain null "
        "bytes"
    )
    (tmp_path / "link.py").symlink_to(tmp_path / "gone.py")
    assert refusal(f"{tmp_path}/link.py:solve") == (
        f"method.path={tmp_path}/link.py:solve: {tmp_path}/link.py is a link to {tmp_path}/gone.py, which does not "
        "exist"
    )
    value = solver_file(tmp_path, "solve = 3\n", "value.py")
    assert refusal(f"{value}:solve") == f"method.path={value}:solve: solve is a int, not a function"
    assert (
        refusal("no_such_pkg.mod:solve")
        == "method.path=no_such_pkg.mod:solve: no module named 'no_such_pkg' on the path"
    )
    assert refusal(f"{honest}:solve", "device=torch_cpu").startswith(
        "device.backend='torch' is not allowed for method=solver: expected numpy"
    )
    assert refusal(f"{honest}:solve", "tracker.source=hand").startswith(
        "tracker.source='hand' is not allowed for method=solver: expected auto"
    )
    check_job(job.job_config(compose("method=solver", f"method.path={honest}:solve")))  # a good one passes


def test_a_bad_path_stops_a_run_and_a_sweep_before_any_job(store, tmp_path):
    p = run_sweep("method=solver", "method.path=examples/solvers/honest.py:slove", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert (
        p.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "method.path=examples/solvers/honest.py:slove: examples/solvers/honest.py has no function 'slove' (did you "
            "mean solve?)"
        )
    )
    p = run_sweep(
        "-m", "method=solver", "method.path=examples/solvers/honest.py:solve,examples/solvers/nope.py:solve",
        "problem.seed=1,2", cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        "sweep: config error in job path=examples/solvers/nope.py:solve seed=1: method.path="
        f"examples/solvers/nope.py:solve: no file examples/solvers/nope.py (in {tmp_path} or {PROJECT_ROOT})"
    ]
    assert p.stdout == ""  # no job ran
    # a round with no entrant: the preset's resolver says so in one line (it was a parse error of `${entrants:...}`)
    p = run_sweep("sweeps=parity_challenge", "challenge.solvers=[]", "challenge.references=[]", cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.strip().splitlines() == [
        "sweep: config error: challenge.solvers and challenge.references are both empty: a round needs an entrant"
    ]


def test_the_honest_example_is_measured_and_judged_after_its_solve():
    cfg_args = ("method=solver", f"method.path={EXAMPLES}/honest.py:solve")
    cfg = compose(*cfg_args, "tracker=energy")
    r = job.run(cfg)
    m = r.metrics
    # priced from the clock it records (the call alone): cost_usd was the sandbox's whole life, ~20x wall_clock_s
    assert m["cost_usd"] == pytest.approx(m["wall_clock_s"] * cfg.device.price_per_hour / 3600, rel=1e-12)
    assert m["accuracy"] == m["train_accuracy"] == m["secret_correct"] == 1.0
    assert m["dmd"] > 0 and m["energy_pj"] > 0 and m["reads"] > 0
    assert m["escaped"] == 0 and m["outside_numpy"] == 0 and m["escaped_allowed"] == 20
    assert r.tags["secret_found"] == r.tags["secret"] and r.tags["sweep.scorer"] == this_scorer()
    assert r.artifacts["solver.py"] == (EXAMPLES / "honest.py").read_text()
    assert len(r.tags["sweep.solver_sha"]) == 16
    # solved in a batch (hydra.launcher.batch), each run keeps its own call's clock: not marked as a batch's share
    # (compare's "(b)" note said wall_clock_s was each run's share of its batch)
    from sweep.batch.run import run_batch  # noqa: PLC0415

    batch = run_batch([compose(*cfg_args, "tracker=none", f"problem.seed={s}") for s in (1, 2)])
    assert [b.tags["sweep.batch.size"] for b in batch] == ["2", "2"]
    assert not [b for b in batch if "batch_wall_s" in b.metrics], [b.metrics for b in batch]


def test_work_in_python_lists_is_flagged_and_the_answer_still_judged():
    r = job.run(compose("method=solver", f"method.path={EXAMPLES}/python_lists.py:solve", "tracker=dmd"))
    assert r.metrics["accuracy"] == 1.0
    assert r.metrics["escaped"] == 32 * 20 + 32 and r.metrics["outside_numpy"] == 1.0  # its 32 rows and labels
    looser = job.run(
        compose("method=solver", f"method.path={EXAMPLES}/python_lists.py:solve", "method.max_escaped=1000")
    )
    assert looser.metrics["outside_numpy"] == 0.0
    below = job.run(compose("method=solver", f"method.path={EXAMPLES}/below_bar.py:solve", "tracker=none"))
    assert below.metrics["accuracy"] < 0.95 and below.metrics["secret_correct"] == 0.0


def test_the_solver_gets_the_training_data_and_the_sizes_and_nothing_else(tmp_path):
    # it sees (x, y, n_bits, k_sparse) only, as numpy arrays of the training rows (what it saw is checked in it: a
    # wrong one raises); what it writes into them does not reach the data the project judges its answer on
    mine = solver_file(
        tmp_path,
        """
        import itertools, numpy as np

        def solve(*args):
            x, y, n_bits, k_sparse = args
            seen = (len(args), isinstance(x, np.ndarray), x.shape, y.shape, n_bits, k_sparse)
            assert seen == (4, True, (200, 12), (200,), 12, 3), seen
            subsets = np.array(list(itertools.combinations(range(n_bits), k_sparse)))
            fits = np.all(np.prod(x[:32][:, subsets], axis=2) == y[:32, None], axis=0)
            x[:] = 0
            y[:] = 0
            return subsets[np.argmax(fits)]
        """,
    )
    r = job.run(compose("method=solver", f"method.path={mine}:solve", *SMALL))
    assert r.metrics["accuracy"] == r.metrics["train_accuracy"] == 1.0


@pytest.mark.parametrize(
    "answer, why",
    [("None", "expected the secret's indices"), ("[0, 99, 1]", "expected distinct indices in 0..19"),
     ("[1, 1, 2]", "expected distinct indices"), ("['a']", "expected the secret's indices"),
     ("[True, 2, 3]", "expected the secret's indices"), ("[1.5, 2, 3]", "expected the secret's indices"),
     # a prober's round: 10**8 zeros were made 10**8 Python objects and listed whole in the reason (minutes)
     ("__import__('numpy').zeros(10**7, 'int8')", r"^solve returned 10,000,000 values: expected the secret's "
      r"indices, at most 20 distinct integers in 0..19$"),
     ("[list(range(30))]", "returned 30 values")],
)  # fmt: skip
def test_an_answer_that_is_not_indices_fails_the_run(tmp_path, answer, why):
    bad = solver_file(tmp_path, f"def solve(x, y, n_bits, k_sparse):\n    return {answer}\n")
    with pytest.raises(ValueError, match=why):
        job.run(compose("method=solver", f"method.path={bad}:solve"))


def test_a_single_run_whose_solver_fails_is_its_failed_line_and_record_not_a_traceback(store, tmp_path):
    """A prober's round of issue 43: a single run whose solver raised (or returned no indices) was recorded
    FAILED and then ended in Hydra's report of the project's traceback (17 lines); a sweep's job says one
    [FAILED] line. Now a single run says the same line, exit 1, its traceback kept as the run's artifact."""
    bad = solver_file(tmp_path, "def solve(x, y, n_bits, k_sparse):\n    raise ValueError('boom')\n")
    p = run_sweep("method=solver", f"method.path={bad}:solve", cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr and "HYDRA_FULL_ERROR" not in p.stderr, p.stderr
    (line,) = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert line.startswith("[FAILED] solver-standard-cpu-seed42 error=") and "ValueError: boom" in line, line
    from mlflow.tracking import MlflowClient  # noqa: PLC0415

    client = MlflowClient()
    (run,) = client.search_runs([client.get_experiment_by_name("sweep").experiment_id])
    assert run.info.status == "FAILED" and "traceback.txt" in [a.path for a in client.list_artifacts(run.info.run_id)]


def test_the_references_are_the_projects_methods_under_the_same_harness():
    for name in ("fourier", "smt", "gf2"):
        r = job.run(compose("method=solver", f"method.path=sweep.challenge.references:{name}", *SMALL))
        assert r.metrics["accuracy"] == 1.0, name
    # gf2 packs rows into Python ints: the values it takes out are counted, and flag it
    assert r.metrics["outside_numpy"] == 1.0 and r.metrics["escaped"] > 200


def test_a_changed_scorer_gets_another_hash(tmp_path):
    pkg, conf = tmp_path / "sweep", tmp_path / "conf"
    shutil.copytree(PACKAGE_DIR, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(CONF_DIR, conf)
    same = scorer_hash(pkg, conf)
    assert same == scorer_hash() == this_scorer()
    (pkg / "methods" / "sgd.py").write_text((pkg / "methods" / "sgd.py").read_text() + "\n# not the scorer\n")
    assert scorer_hash(pkg, conf) == same
    for changed in (pkg / "trackers" / "dmd.py", pkg / "methods" / "solver.py", conf / "energy" / "cpu.yaml"):
        before = changed.read_text()
        changed.write_text(before + "\n# a change\n")
        assert scorer_hash(pkg, conf) != same, changed
        changed.write_text(before)
    assert scorer_hash(pkg, conf) == same


def test_fresh_seeds_are_drawn_once_a_process_and_distinct():
    seeds = challenge_round.fresh_seeds(5)
    values = [int(s) for s in seeds.split(",")]
    assert len(set(values)) == 5 and all(0 <= v <= SEED_MAX for v in values)
    assert challenge_round.fresh_seeds(5) == seeds
    with pytest.raises(ValueError, match="challenge.seeds=0 is not allowed"):
        challenge_round.fresh_seeds(0)
    assert (
        challenge_round.entrants(["a/b.py:solve", "x y.py:f"], ["a/b.py:solve", "m:g"]) == "a/b.py:solve,'x y.py:f',m:g"
    )


def test_a_module_beside_the_command_is_found_by_the_console_script_as_by_python_m(tmp_path):
    """`method.path=my_solver:solve` beside my_solver.py ran under `.venv/bin/python -m sweep` (the directory on
    sys.path) and was "no module named 'my_solver' on the path" under `.venv/bin/sweep`, the README's command."""
    import subprocess

    solver_file(tmp_path, "def solve(x, y, n_bits, k_sparse):\n    return [0, 1, 2]\n", "my_solver.py")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ("method=solver", "method.path=my_solver:solve", "problem.n_bits=5", f"mlflow.tracking_uri={store}")
    p = subprocess.run(
        [str(PROJECT_ROOT / ".venv/bin/sweep"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0 and "[FINISHED] solver-standard-cpu-seed42" in p.stdout, p.stdout + p.stderr
