"""`python -m sweep` as a user runs it: help, composed config, an end-to-end run, and bad input."""

import os
import subprocess

import pytest
from mlflow.tracking import MlflowClient

from sweep import job
from sweep.errors import ConfigError
from tests.conftest import ROOT, compose, run_sweep


def _runs(store):
    c = MlflowClient(store)
    return [r for e in c.search_experiments() for r in c.search_runs([e.experiment_id])]


def test_help_lists_groups_and_options(tmp_path):
    p = run_sweep("--help", cwd=tmp_path)
    assert p.returncode == 0
    groups = dict(ln.split(": ", 1) for ln in p.stdout.splitlines() if ": " in ln and "/" not in ln.split(":")[0])
    assert {"sgd", "gf2", "km"} <= set(groups["method"].split(", "))
    assert "sparse_parity" in groups["problem"] and "cpu" in groups["device"]
    assert {"ard", "none"} <= set(groups["tracker"].split(", ")) and "standard" in groups["variant"]
    # every group that is no choice of a job is explained under the list (sweeps/*_arm were listed unexplained)
    note = " ".join(p.stdout.split("== Config groups", 1)[1].split("== Config (", 1)[0].split())
    listed = {ln.split(":")[0] for ln in p.stdout.splitlines() if ": " in ln and "/" in ln.split(":")[0]}
    assert listed and all(("schema/*" if g.startswith("schema/") else "sweeps/<preset>_arm") in note for g in listed)


def test_cfg_job_prints_composed_config(tmp_path):
    p = run_sweep("--cfg", "job", "method=km", cwd=tmp_path)
    assert p.returncode == 0
    assert "influence_samples: 5" in p.stdout and "n_bits: 20" in p.stdout


@pytest.mark.new_store
def test_end_to_end_run_lands_in_mlflow(store, tmp_path):
    p = run_sweep("method=gf2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # a single run is named by its groups and seed, on the console and in MLflow
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("[FINISHED] gf2-standard-cpu-seed42 ")][0]
    assert "accuracy=1.000" in line and "ard=" in line and "cost_usd=" in line and "run_id=" in line
    (run,) = _runs(store)
    assert run.info.status == "FINISHED" and run.data.metrics["accuracy"] == 1.0
    assert run.info.run_name == "gf2-standard-cpu-seed42"
    assert line.endswith(run.info.run_id)


@pytest.mark.new_store
def test_multirun_with_basic_launcher_records_parent_and_children(store, tmp_path):
    p = run_sweep("-m", "hydra/launcher=basic", "method=gf2,km", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    runs = _runs(store)
    parents = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 2
    assert {c.data.tags["method"] for c in children} == {"gf2", "km"}
    assert {c.info.run_name for c in children} == {"method=gf2", "method=km"}  # named by what the sweep varies
    assert "[FINISHED] method=km accuracy=" in p.stdout


@pytest.mark.parametrize(
    "override, field, allowed",
    [
        ("problem.k_sparse=25", "problem.k_sparse", "k_sparse <= problem.n_bits"),
        ("problem.n_bits=0", "problem.n_bits", "integer >= 1"),
        ("problem.n_train=-5", "problem.n_train", "integer >= 1"),
        ("method.hidden=0", "method.hidden", "integer >= 1"),
        ("method.batch_size=0", "method.batch_size", "integer from 1 to problem.n_train"),
        ("method.lr=0", "method.lr", "finite number > 0"),
        ("method.lr=-0.1", "method.lr", "finite number > 0"),
        ("method.lr=nan", "method.lr", "finite number > 0"),
        ("method.lr=inf", "method.lr", "finite number > 0"),
        ("tracker.scope=everything", "tracker.scope", "published, init_sample0, all_steps"),
        ("device.compile_mode=fastest", "device.compile_mode", "default, reduce-overhead, max-autotune"),
        ("device.autocast=int8", "device.autocast", "none, float16, bfloat16"),
        ("device.threads=-1", "device.threads", "integer from 0 to 1024"),
        ("device.autocast=float16", "device.autocast", "need device.backend=torch"),  # numpy has no autocast
        ("method=fourier method.chunk=-1", "method.chunk", "integer >= 1"),
    ],
)
def test_bad_values_name_field_and_allowed_values(override, field, allowed):
    with pytest.raises(ConfigError) as e:
        job.run(compose(*override.split()))
    assert field in str(e.value) and allowed in str(e.value)


@pytest.mark.parametrize("override", ["problem.k_sparse=25", "method.lr=-0.1"])
def test_bad_values_exit_non_zero_before_any_run(store, tmp_path, override):
    p = run_sweep(override, cwd=tmp_path)
    assert p.returncode == 2
    assert override.split("=")[0] in p.stderr and "not allowed" in p.stderr
    assert _runs(store) == []


@pytest.mark.parametrize(
    "overrides, field",
    [
        # numpy's RandomState would raise inside the job (problem.seed, and seed + 1 for the MLP's weights)
        (["method=gf2", "problem.seed=4294967296"], "problem.seed"),
        (["method=sgd", "problem.seed=4294967295"], "problem.seed"),
        (["method=gf2", "problem.seed=-1"], "problem.seed"),
        # sizes below their least meaningful value (0 is max_rows' and screen_rows' "the default")
        (["method=forward_forward", "method.layers=0"], "method.layers"),
        (["method=gf2", "method.max_rows=-1"], "method.max_rows"),
        (["method=smt", "method.screen_rows=-1"], "method.screen_rows"),
        (["method=smt", "method.pair_block=0"], "method.pair_block"),
        (["method=fourier", "method.max_subsets=0"], "method.max_subsets"),
    ],
)
@pytest.mark.parametrize("multirun", [False, True], ids=["single", "sweep"])
def test_out_of_range_values_refused_in_one_line_before_any_run(store, tmp_path, overrides, field, multirun):
    # in a sweep the bad job sits beside a good one: both are refused before either runs
    args = ["-m", *overrides, "problem.n_bits=8,9"] if multirun else overrides
    p = run_sweep(*args, "tracker=none", cwd=tmp_path, timeout=240)
    assert p.returncode == 2, p.stderr[-2000:]
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("sweep:")]
    assert len(lines) == 1 and f"{field}=" in lines[0] and "not allowed: expected" in lines[0], p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert _runs(store) == []


@pytest.mark.parametrize(
    "overrides, said",
    [
        (
            ["method.lrr=0.1"],
            "method.lrr is not a key of method=sgd: did you mean lr? expected one of batch_size, hidden",
        ),
        (["problem.n_bitz=3"], "problem.n_bitz is not a key of problem=sparse_parity: did you mean n_bits"),
        (["mlflow.experimnt=x"], "mlflow.experimnt is not a key of mlflow: did you mean experiment?"),
        (
            ["method=sdg"],
            "method=sdg is not an option of method: did you mean sgd? expected one of bigram, char_model, curriculum, ",
        ),
        (
            ["device=gpu"],
            "device=gpu is not an option of device: did you mean cuda? expected one of cpu, cuda, torch_cpu",
        ),
        (["method.hidden=abc"], "method.hidden=abc is not allowed: expected an integer"),
        (  # a value rule's choice is told its closest name as a group's option is
            ["tracker.scope=all"],
            "tracker.scope='all' is not allowed: did you mean all_steps? expected one of published, init_sample0, ",
        ),
        (["method.lr=fast"], "method.lr=fast is not allowed: expected a number"),
        (["mlflow.force=maybe"], "mlflow.force=maybe is not allowed: expected true or false"),
        # a top-level key or a group no job chooses (--help lists energy and prices): Hydra's traceback, exit 1
        (["sweep=tiled_w1"], "sweep is not a key of the config: did you mean sweeps? expected one of batch, "),
        (["energy=gpu"], "energy is not a group a job chooses (its options are read by tracker=energy tracker.hi"),
        (["-m", "schema/method=sgd,gf2"], "schema/method is not a group a job chooses: did you mean method? "),
        (["method=gf2,km"], "method=gf2,km is a sweep over method's values, which needs -m: "),  # no -m
        (["problem.seed=range(2)"], "problem.seed=range(2) is a sweep over problem.seed's values, which needs -m: "),
        (["method=[a"], "method=[a is not an override Hydra can read"),
        (  # issue 43's prober: an IPv6 address, which only quotes make a value
            ["mlflow.tracking_uri=http://[::1]:5000"],
            "mlflow.tracking_uri=http://[::1]:5000 is not an override Hydra can read: mismatched input '[' expecting "
            """<EOF> (quote a value that holds brackets: 'mlflow.tracking_uri="http://[::1]:5000"')""",
        ),
        (  # docs/chars.md's own command: the shell leaves `problem.path=~/...` as it is, and Hydra's lexer stops
            ["problem=chars", "problem.path=~/data/wikitext-103-raw"],
            "problem.path=~/data/wikitext-103-raw is not an override Hydra can read: LexerNoViableAltException: "
            "problem.path=~/data/wikitext-103-raw (a ~ after problem.path= is not expanded by the shell: write "
            """problem.path=$HOME/data/wikitext-103-raw, or 'problem.path="~/data/wikitext-103-raw"')""",
        ),
        (["-m", "method=gf2,sdg"], "method=sdg is not an option of method: did you mean sgd?"),  # in a sweep
        (["-m", "hydra/launcher=basic", "method=gf2,sdg"], "method=sdg is not an option of method: did you mean sgd?"),
        (
            ["-m", "hydra/launcher=locall", "method=gf2"],
            "hydra/launcher=locall is not an option of hydra/launcher: did",
        ),
    ],
)
def test_misspelt_names_and_wrong_types_are_one_line_with_the_closest_names(store, tmp_path, overrides, said):
    """Hydra's own reports are several lines (its config search path; advice to add the key with `+`, which
    leads elsewhere; a conversion error's node types): the project's is one, naming the closest names."""
    p = run_sweep(*overrides, f"hydra.sweep.dir={tmp_path / 'multirun'}", cwd=tmp_path)
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.splitlines() == [p.stderr.strip()] and p.stderr.startswith(f"sweep: config error: {said}"), p.stderr
    assert _runs(store) == []


def _no_gpu() -> bool:
    import torch

    return not torch.cuda.is_available()


@pytest.fixture
def no_modal_token(tmp_path, monkeypatch):
    """A machine without Modal's token: no MODAL_TOKEN_* and an empty Modal config file (read as Modal reads it)."""
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    monkeypatch.delenv("MODAL_PROFILE", raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "modal.toml"))


NO_GPU = pytest.mark.skipif(not _no_gpu(), reason="this machine has a GPU: cuda jobs run here")


@pytest.mark.parametrize(
    "overrides, said",
    [
        # a misspelt key added with Hydra's `+`: the option's keys, for a single run and a sweep, on either launcher
        (
            ["+method.lrr=0.1"],
            "method.lrr is not a key of method=sgd: did you mean lr? expected one of batch_size, hidden",
        ),
        (["-m", "+method.lrr=0.1", "method=sgd,km"], "method.lrr is not a key of method=sgd"),
        (["-m", "hydra/launcher=basic", "+method.lrr=0.1", "method=sgd,km"], "method.lrr is not a key of method=sgd"),
        # cuda jobs placed on Modal without a token: Modal's token message, once
        (["-m", "method=sgd,km", "device=cuda"], "2 job(s) placed on Modal, which has no API token on this machine"),
        pytest.param(
            ["-m", "method=sgd,km", "device=cuda", "hydra.launcher.modal.offline=true"],
            "needs a CUDA GPU",
            marks=NO_GPU,
        ),
        pytest.param(["-m", "hydra/launcher=basic", "method=sgd,km", "device=cuda"], "needs a CUDA GPU", marks=NO_GPU),
        pytest.param(["device=cuda"], "needs a CUDA GPU", marks=NO_GPU),
    ],
)
def test_a_sweep_refuses_what_a_single_run_refuses(store, tmp_path, no_modal_token, overrides, said):
    """Bad input, single run or sweep, any launcher: exit 2, one `sweep:` line, before any job, no run."""
    p = run_sweep(*overrides, f"hydra.sweep.dir={tmp_path / 'multirun'}", cwd=tmp_path)
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.startswith("sweep:")]
    assert len(lines) == 1 and said in lines[0], p.stdout + p.stderr
    assert "Traceback" not in p.stderr and "[FAILED]" not in p.stdout + p.stderr
    assert _runs(store) == []


@NO_GPU
@pytest.mark.parametrize("form", ["-m last", "-m first", "single run"])
def test_a_cuda_job_without_a_gpu_or_a_token_says_what_runs_here_first(store, tmp_path, no_modal_token, form):
    """The README's GPU command on a machine with no GPU and no Modal token: the line names what works here first
    (device=torch_cpu, as a command that runs when pasted), then the way to a GPU (Modal's token); never offline
    mode, which needs a GPU here."""
    args = {
        "-m last": ["method=km,gf2", "device=cuda", "tracker=none", "-m"],
        "-m first": ["-m", "method=km,gf2", "device=cuda"],
        # a prober's round: a CUDA device named on the command line was kept in the pasted command, which failed so
        "single run": ["method=km", "device=cuda", "device.torch_device=cuda:1", "tracker=none"],
    }[form]  # tracker=none: the pasted command runs in the test (the default trackers' traces: seconds more)
    p = run_sweep(*args, cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    line = p.stderr.strip()
    assert "offline" not in line and line.index("device=torch_cpu runs the same torch code") < line.index("token new")
    pasted = line.split("on this CPU: ", 1)[1].split("; ", 1)[0]
    if form == "-m first":  # the same line as the README's form; a command after either form pastes: test_hints
        words = pasted.split()
        assert words[1] == "-m" and "method=km,gf2" in words and words[-1] == "device=torch_cpu", pasted
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["bash", "-c", pasted], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {r.data.params.get("device.name") for r in _runs(store)} - {None} == {"torch_cpu"}  # None: a parent


def test_a_repeated_single_run_shows_the_recorded_one_unless_forced(store, tmp_path):
    """A finished single run is not recorded again: the repeat shows it (exit 0); mlflow.force=true records the
    next repeat of the config (extra.repeat 1, 2, ...), named and tagged as one."""
    first = run_sweep("method=gf2", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    (run,) = _runs(store)
    again = run_sweep("method=gf2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("sweep: already recorded, not run again (mlflow.force=true records a repeat: ")
    shown = [ln for ln in again.stdout.splitlines() if ln.startswith("[FINISHED] gf2-standard-cpu-seed42 ")]
    assert shown and "accuracy=1.000" in shown[0] and shown[0].endswith(f"run_id={run.info.run_id}")
    assert f"/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}" in again.stdout
    assert [r.info.run_id for r in _runs(store)] == [run.info.run_id]
    for n in (1, 2):
        forced = run_sweep("method=gf2", "mlflow.force=true", cwd=tmp_path)
        assert forced.returncode == 0, forced.stderr
        assert f"[FINISHED] gf2-standard-cpu-seed42-repeat{n} accuracy=1.000" in forced.stdout
    runs = sorted(_runs(store), key=lambda r: r.info.start_time)
    assert [r.info.run_name for r in runs] == [
        "gf2-standard-cpu-seed42",
        "gf2-standard-cpu-seed42-repeat1",
        "gf2-standard-cpu-seed42-repeat2",
    ]
    assert [r.data.params.get("extra.repeat") for r in runs] == [None, "1", "2"]
    assert {r.data.tags.get("sweep.repeat_of") for r in runs[1:]} == {run.info.run_id}
    assert runs[1].data.metrics["accuracy"] == run.data.metrics["accuracy"]


def test_hydras_job_directories_land_where_the_readme_says(store, tmp_path):
    """outputs/ (a single run's job directory) and multirun/ (a sweep's) follow the working directory, the store
    does not: the README's "Where things land" says so."""
    readme = (ROOT / "README.md").read_text()
    assert "| `outputs/<date>/<time>/` under the directory you run from |" in readme
    assert "| `multirun/<date>/<time>/<job>/` under the directory you run from |" in readme
    here = tmp_path / "here"
    here.mkdir()
    assert run_sweep("method=gf2", "problem.n_bits=10", cwd=here).returncode == 0
    assert run_sweep("-m", "method=gf2", "problem.n_bits=10", "problem.seed=1,2", cwd=here).returncode == 0
    assert [p.parent.name for p in (here / "outputs").glob("*/*/.hydra")]  # outputs/<date>/<time>/.hydra
    # the job is named after the app (its log; a search's study), not Hydra's entry module: `__main__.log`
    assert [p.name for p in (here / "outputs").glob("*/*/*.log")] == ["sweep.log"]
    assert sorted(p.parent.name for p in (here / "multirun").glob("*/*/*/.hydra")) == ["0", "1"]
    assert not (here / "mlruns").exists() and len(_runs(store)) == 4  # the store: where the settings say


def test_each_commands_help_says_what_it_does_in_a_whole_sentence(capsys):
    """`sweep-rescore --help` said "...: a tracker's figures for" (its docstring's first line), `sweep-ui --help`
    ended on a comma, and `sweep-compare --help` said `python -m sweep.compare` under a usage of
    `.venv/bin/sweep-compare`: each description is the docstring's first sentence, without the command; and
    `sweep-compare` alone asked for "ref", a name no page uses."""
    import importlib

    from sweep.arguments import summary

    wanted = {
        "sweep.rescore.__main__": "a tracker's figures for runs already recorded, computed from the traces they "
        "stored (trace.json) and logged to the same runs.",  # (it named a module, sweep.rescore.runs)
        "sweep.report.ui": "the MLflow UI on the project's store, bound to 127.0.0.1 (this machine only), and the "
        "address that opens a study's runs.",
        "sweep.report.compare": "one sweep's results as a table and a plot.",
    }
    for module, sentence in wanted.items():
        with pytest.raises(SystemExit) as done:
            importlib.import_module(module).main(["--help"])
        said = " ".join(capsys.readouterr().out.split())
        assert done.value.code == 0 and sentence in said and "python -m" not in said, said
    assert summary("`x a`: does this.\nAnd more.\n\nDetails.") == "does this."
    with pytest.raises(SystemExit):  # nothing named: the argument is called what the docs call it
        importlib.import_module("sweep.report.compare").main([])
    assert "the following arguments are required: study (see " in capsys.readouterr().err


def test_a_deleted_working_directory_is_one_line_from_every_command(tmp_path):
    """Issue 43, seventh round: a command run from a directory removed after the shell entered it was a traceback
    of 36 lines (Hydra's os.getcwd()) from sweep, and one from each other command."""
    bins = ROOT / ".venv" / "bin"
    for c, args in [("sweep", "method=gf2"), ("sweep-compare", "x"), ("sweep-store", "check")]:
        gone = tmp_path / c
        gone.mkdir()
        p = subprocess.run(  # the shell enters it, removes it, then runs the command there
            ["bash", "-c", f"cd {gone} && rmdir {gone} && exec {bins / c} {args}"], capture_output=True, text=True
        )
        assert p.returncode == 1 and p.stderr.splitlines() == [
            f"{c}: the current directory no longer exists (it was removed after the shell entered it): cd to one "
            "that exists and run the command again"
        ], (c, p.stderr)
