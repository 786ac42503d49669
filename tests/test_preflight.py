"""sweep.preflight: every refusal before a job, in one place, on every path."""

from __future__ import annotations

import os
import sqlite3
import subprocess

import pytest

from sweep.preflight.command import check_command
from sweep.preflight.refusal import Refusal
from tests.conftest import run_sweep
from tests.disks import fill, tmpfs


def test_the_multirun_flag_is_read_wherever_it_stands(store, tmp_path):
    """`-m` last, as the README writes the command, then an override pasted after it (every hint appends one):
    Hydra's parser alone takes no override after the flag (`unrecognized arguments`, exit 2)."""
    p = run_sweep("method=gf2", "-m", "mlflow.experiment=last", f"hydra.sweep.dir={tmp_path / 'm'}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "1 job(s) finished" in p.stdout
    assert check_command(["a=1", "-m", "b=2"]) == ["-m", "a=1", "b=2"]
    assert check_command(["--multirun", "a=1", "-m"]) == ["--multirun", "a=1"]


def test_a_refusal_is_one_line_and_its_exit_code(capsys):
    with pytest.raises(SystemExit) as e:
        Refusal.config_error("x=1 is not allowed: expected 2").exit()
    assert e.value.code == 2
    assert capsys.readouterr().err == "sweep: config error: x=1 is not allowed: expected 2\n"


def test_a_preset_is_named_whole_and_one_a_command(monkeypatch):
    """A misspelt preset gets the closest names; two presets in one command were run as one job of each (their
    sweeps ignored) into the first one's study: refused, with the command for each."""
    monkeypatch.setattr("sys.argv", ["sweep", "sweeps=tiled_w1,sign_vs_sgd", "-m"])
    with pytest.raises(Refusal) as e:
        check_command(["sweeps=tiled_w1,sign_vs_sgd", "-m"])
    assert e.value.line.startswith(
        "config error: sweeps=tiled_w1,sign_vs_sgd names 2 presets: each is a sweep of its own, one a command: "
    )
    assert e.value.line.endswith(" sweeps=tiled_w1, then " + e.value.line.split(", then ")[1])
    assert e.value.line.split(", then ")[1].endswith(" -m sweeps=sign_vs_sgd"), e.value.line
    with pytest.raises(Refusal, match=r"sweeps=tiled is not a preset: did you mean tiled_w1\? expected one of "):
        check_command(["sweeps=tiled"])
    assert check_command(["sweeps=tiled_w1", "-m"]) == ["-m", "sweeps=tiled_w1"]


def test_a_preset_key_given_twice_is_two_presets(store, tmp_path):
    """`sweeps=tiled_w1 sweeps=sign_vs_sgd` ran the second alone, silently (Hydra keeps a key's last value), and
    its hint named the first study: refused as `sweeps=a,b` is, one line, exit 2, nothing run."""
    p = run_sweep("sweeps=tiled_w1", "sweeps=sign_vs_sgd", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and not p.stdout, (p.stdout, p.stderr[-2000:])
    assert p.stderr.startswith("sweep: config error: sweeps=tiled_w1 sweeps=sign_vs_sgd names 2 presets: "), p.stderr
    assert p.stderr.rstrip().endswith(" sweeps=sign_vs_sgd") and " sweeps=tiled_w1, then " in p.stderr
    assert not (tmp_path / "multirun").exists() and not (tmp_path / "outputs").exists()


def test_a_sweeps_values_without_the_multirun_flag_are_one_line_with_the_command(store, tmp_path):
    """`problem.seed=1,2` without `-m` was Hydra's traceback and exit 1: one line, exit 2, nothing recorded, with
    the command that sweeps them (it runs pasted) and, for a key, how a list is written."""
    p = run_sweep("method=gf2", "problem.seed=1,2", "problem.n_bits=10", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr[-2000:]
    line = p.stderr.strip()
    assert line.startswith("sweep: config error: problem.seed=1,2 is a sweep over problem.seed's values, which ")
    assert line.endswith(" -m (a list value is written problem.seed=[1,2])"), line
    command = line.split("which needs -m: ", 1)[1].removesuffix(" (a list value is written problem.seed=[1,2])")
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "sweep: 2 job(s) finished" in done.stdout, done.stderr[-2000:]
    # a prober's round: a quoted value was cut at its first quote ("mlflow.force= is a sweep over ...")
    from hydra.errors import ConfigCompositionException  # noqa: PLC0415

    from sweep.preflight.composition import explain  # noqa: PLC0415

    said = explain(ConfigCompositionException("Ambiguous value for argument 'mlflow.force='${a}',true'\n1. To"))
    assert said.line.startswith("config error: mlflow.force='${a}',true is a sweep over mlflow.force's values"), said


def test_lines_that_were_garbled_name_what_is_allowed(store, tmp_path):
    """Hydra's basic launcher given the project's launcher's key said "expected one of " and nothing; a list
    field given one value, OmegaConf's "Invalid value assigned: str is not a ListConfig"; a syntax error in a
    user's solver named importlib's line (241), not the user's file and line."""
    (tmp_path / "bad.py").write_text("import numpy as np\n\n\ndef solve(x, y, n_bits, k_sparse)\n    return x\n")
    for args, said in (
        (
            ("-m", "hydra/launcher=basic", "hydra.launcher.n_workers=2", "method=gf2"),
            "hydra.launcher.n_workers is not a key of hydra.launcher, which takes none (n_workers is a key of "
            "hydra/launcher=sweep, the project's launcher)",
        ),
        (
            ("method=curriculum", "method.schedule=bogus"),
            "method.schedule=bogus is not allowed: expected a list, written method.schedule=[10,30]",
        ),
        (
            ("method=solver", "method.path=bad.py:solve"),
            "method.path=bad.py:solve: loading bad.py raised SyntaxError: expected ':' (bad.py, line 4)",
        ),
        # a fresh prober's round: OmegaConf's words ("field 'problem.n_bits' is not Optional", "Cannot convert
        # 'list' to string: ...", "SparseParityConfig (DictConfig) does not support deletion") named no value
        (
            ("method=gf2", "problem.n_bits=null"),
            "problem.n_bits=null is not allowed: expected an integer >= 1 (it takes no null)",
        ),
        (("method=gf2", "mlflow.experiment=[a,b]"), "mlflow.experiment=[a,b] is not allowed: expected a string"),
        (
            ("method=gf2", "~device.dtype"),
            "~device.dtype would remove device.dtype, a field every job has: set it instead (device.dtype=<value>, "
            "expected one of float32, float64)",
        ),
    ):
        p = run_sweep(*args, cwd=tmp_path)
        assert p.returncode == 2 and p.stderr == f"sweep: config error: {said}\n", (args, p.stderr[-2000:])


def test_an_option_a_presets_file_does_not_fit_is_one_line_naming_the_file(store, tmp_path):
    """A prober's round of issue 43: a preset with another option of a group (`sweeps=tiled_w1 method=gf2`: the
    preset sets method.lr), or a sweep over options its arms' files do not fit, was Hydra's whole traceback and
    exit 1 (OmegaConf's error is the merge error's context, not its cause); so were a key a preset's compare
    settings lack and `extra.note=x` without its + (Hydra's advice, exit 1)."""
    for args, said in (
        (("sweeps=tiled_w1", "method=gf2"), "sweeps/tiled_w1.yaml sets method.lr, which method=gf2 does not have"),
        (
            ("sweeps=sign_vs_sgd", "-m", "method=km,gf2"),
            "sweeps/sign_vs_sgd_arm/sgd.yaml sets method.lr, which method=km does not have (its keys: "
            "influence_samples): that option does not fit this preset's runs",
        ),
        # a key of a free-form node: one not there (the preset's compare settings), one of the user's own without +
        (
            ("sweeps=sign_vs_sgd", "compare.baseline.method.name=x"),
            "compare.baseline.method is not a key of compare.baseline: did you mean method.name?",
        ),
        (
            ("extra.note=x", "method=gf2"),
            "extra.note is not a key of extra: a key of your own is added with a +: +extra",
        ),
        # a mapping given a list (Hydra's traceback) or one value ("expected Cannot assign int to Dict[str, Any]")
        (
            ("tracker=energy", "tracker.levels=[]"),
            "tracker.levels=[] is not allowed: expected a mapping, set key by key: +tracker.levels.<key>=<value>",
        ),
        (("tracker=energy", "tracker.ops_pj=-1"), "tracker.ops_pj=-1 is not allowed: expected a mapping, set key by"),
    ):
        p = run_sweep(*args, cwd=tmp_path)
        assert p.returncode == 2 and not p.stdout and len(p.stderr.splitlines()) == 1, (args, p.stderr[-2000:])
        assert p.stderr.startswith(f"sweep: config error: {said}"), p.stderr
    assert not (tmp_path / "outputs").exists()  # (a sweep's multirun.yaml is Hydra's, written before its launcher)


def test_a_key_given_twice_with_two_values_is_refused_as_a_preset_given_twice_is():
    """A prober's round of issue 43: `method=gf2 method=km` ran km alone, silently (Hydra keeps a key's last
    value); the same option twice, a value given twice (the last wins) and the hints still pass."""
    with pytest.raises(Refusal) as e:
        check_command(["method=gf2", "problem.seed=3", "method=km"])
    assert e.value.line == (
        "config error: method is given twice (method=gf2 method=km), and only the last would run: give it once "
        "(a sweep over both: method=gf2,km -m)"
    )
    with pytest.raises(Refusal, match=r"^config error: tracker is given twice \(tracker=ard tracker=dmd\)"):
        check_command(["tracker=ard", "hydra/launcher=local", "tracker=dmd"])
    # a group left with no option or several (a fresh prober's round): Hydra's ValueError or
    # ConfigCompositionException traceback, or (~method) a job run without its method that failed after making the store
    for argv, said in (
        (["method=null"], "method=null chooses no option of method, and every job takes one: expected one of "),
        (["-m", "method=[sgd,km]"], "method=[sgd,km] chooses several options of method, and a job takes one (a "),
        (["~method"], "~method would remove method, and every job takes one of its options: expected one of "),
        (["+tracker=none"], "+tracker=none would add a second tracker, and a job takes one: tracker=none chooses it"),
    ):
        with pytest.raises(Refusal) as refused:
            check_command(argv)
        assert refused.value.line.startswith(f"config error: {said}"), refused.value.line
        assert refused.value.line.endswith(", sgd, sign_sgd, smt, solver") or "tracker" in argv[0]
    # Hydra's own groups and the presets' (a sixth prober's round): `hydra/launcher=null` was Hydra's ValueError
    # traceback, `~hydra/launcher` a FAILED run with a garbled error, `+sweeps=x` a ConfigCompositionException,
    # `sweeps=[tiled_w1]` ran the preset with hints naming a study '[tiled_w1]', `method=[]` "method= chooses it"
    launchers = "expected one of basic, local, modal, submitit_local, submitit_slurm, sweep"
    for argv, said in (
        (
            ["hydra/launcher=null"],
            f"hydra/launcher=null chooses no option of hydra/launcher, and every job takes one: {launchers}",
        ),
        (["~hydra/launcher"], "~hydra/launcher would remove hydra/launcher, and every job takes one of its options: "),
        (["hydra/job_logging=null"], "hydra/job_logging=null chooses no option of hydra/job_logging, and every job "),
        (["+sweeps=tiled_w1"], "+sweeps=tiled_w1: a preset is chosen, not added: sweeps=tiled_w1 chooses it: "),
        (["sweeps=[tiled_w1]"], "sweeps=[tiled_w1] is a list, and sweeps takes one option: sweeps=tiled_w1 chooses it"),
        (
            ["sweeps=[tiled_w1,sign_vs_sgd]"],
            "sweeps=[tiled_w1,sign_vs_sgd] names 2 presets: each is a sweep of its own",
        ),
        (["sweeps=[]"], "sweeps=[] names no preset: leave sweeps out"),
        (["method=[]"], "method=[] chooses no option of method, and every job takes one: expected one of bigram, "),
    ):
        with pytest.raises(Refusal) as refused:
            check_command(argv)
        assert refused.value.line.startswith(f"config error: {said}"), refused.value.line
        assert len(refused.value.line.splitlines()) == 1
    assert check_command(["~sweeps"]) == ["~sweeps"]  # no preset, as leaving it out
    # a value given twice: Hydra's rule, the last wins (a wrapper's default, then the user's)
    assert check_command(["problem.n_bits=10", "problem.n_bits=11"]) == ["problem.n_bits=10", "problem.n_bits=11"]
    assert check_command(["method=gf2", "-m", "method=gf2"]) == ["-m", "method=gf2", "method=gf2"]  # (with --cfg
    # too it was Hydra's ValueError: one of -m and --cfg at a time)


def test_a_misspelt_flag_is_one_line_with_the_flag_meant():
    """A prober's round of issue 43: `sweep --multrun`, `-M`, `--cfg jbo` printed Hydra's usage block (a dozen
    lines) and a last line naming no flag; `-m` with `--cfg` was Hydra's ValueError traceback."""
    for argv, said in (
        (["--multrun", "method=gf2"], "unrecognized arguments: --multrun (did you mean --multirun?) (see "),
        (["-M", "method=gf2,km"], "unrecognized arguments: -M (did you mean -m?) (see "),
        (["--cfg", "jbo"], "argument --cfg/-c: invalid choice: 'jbo' (choose from 'job', 'hydra', 'all') (did you "),
    ):
        with pytest.raises(Refusal) as refused:
            check_command(argv)
        assert refused.value.code == 2 and refused.value.line.startswith(said), refused.value.line
        assert refused.value.line.endswith(" --help)") and "\n" not in refused.value.line
    with pytest.raises(Refusal) as refused:  # was Hydra's ValueError traceback, exit 1
        check_command(["method=gf2", "-m", "--cfg", "job"])
    assert (
        refused.value.line == "--multirun and --cfg given together: one of --run, --multirun, --cfg, --info at a time"
    )
    assert check_command(["method=gf2", "-m", "x=1"]) == ["-m", "method=gf2", "x=1"]  # -m anywhere, as before


def test_a_grid_too_big_to_list_is_refused_before_hydra_lists_it(store, tmp_path):
    """A fresh prober's round of issue 43: `-m 'problem.seed=range(0,100000000)'` climbed to 9.5 GB in a minute
    with no job started (Hydra lists every job's overrides first). Now one line, naming the keys, before Hydra."""
    with pytest.raises(Refusal) as refused:
        check_command(["-m", "method=sgd,km", "problem.seed=range(0,10000000000)", "problem.n_bits=8"])
    assert refused.value.code == 2
    assert refused.value.line.startswith(
        "config error: the sweep has 20,000,000,000 jobs (method: 2 values x problem.seed: 10,000,000,000 values), "
        "about 40000.0 GB of the launching process's memory before any job starts, "
    ), refused.value.line
    assert refused.value.line.endswith(
        " is available: lower the values of method, problem.seed, or run the grid in parts"
    )
    # a prober's round: a challenge's fresh seeds (`sweeps=parity_challenge challenge.seeds=100000000`) were drawn
    # and joined for minutes before any check; they are sized as a grid's values, before one is drawn
    p = run_sweep("sweeps=parity_challenge", "challenge.seeds=10000000000", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and p.stderr.startswith(
        "sweep: config error: the sweep has 10,000,000,000 jobs (challenge.seeds: 10,000,000,000 values), about "
    ), p.stderr[-3000:]
    # a grid that fits, a search's space (its trials drawn one by one), a single run: as before
    assert check_command(["-m", "problem.seed=range(0,1000)", "method=sgd,km"])[0] == "-m"
    assert check_command(["-m", "hydra/sweeper=optuna", "problem.seed=range(0,10000000000)"])[0] == "-m"


def test_a_job_directory_that_cannot_be_made_or_written_is_one_line_before_any_job(store, tmp_path):
    """Hydra makes its job directory and writes the config into it before the job: a file in its place, a full
    disk or /proc was Hydra's traceback of 28 to 37 lines, exit 1 (a single run's and a sweep's alike). Now one
    line naming the key, before any job, nothing recorded."""
    (tmp_path / "a_file").write_text("")
    cases = [
        (("method=gf2", f"hydra.run.dir={tmp_path / 'a_file' / 'run'}"), 2, "sweep: config error: hydra.run.dir="),
        (("method=gf2", "hydra.run.dir=/proc/sweep_job"), 1, "sweep: hydra.run.dir=/proc/sweep_job: /proc cannot be"),
    ]
    with tmpfs(tmp_path / "disk", size="64k") as disk:
        fill(disk)
        cases.append((("-m", "method=gf2", f"hydra.sweep.dir={disk / 'sw'}"), 1, f"sweep: hydra.sweep.dir={disk}"))
        for args, code, start in cases:
            p = run_sweep(*args, cwd=tmp_path)
            assert p.returncode == code and len(p.stderr.splitlines()) == 1, (args, p.stderr[-3000:])
            assert p.stderr.startswith(start) and "directory" in p.stderr and not p.stdout, (p.stdout, p.stderr)
        assert "full (No space left on device)" in p.stderr
        filler = disk / "filler"
        os.truncate(filler, filler.stat().st_size - 4096)  # one page free: the probe's write was short, not refused
        p = run_sweep(*cases[-1][0], cwd=tmp_path)
        assert p.returncode == 1 and len(p.stderr.splitlines()) == 1, p.stderr[-3000:]
        assert p.stderr.startswith(cases[-1][2]) and "full (No space left on device)" in p.stderr, p.stderr
    # a prober's round: an interpolation that cannot be resolved there was "the store could not be checked, the job
    # was not run: InterpolationKeyError: ..." in three lines, exit 1 (a single run), a traceback (a sweep)
    for args in (("method=gf2", "hydra.run.dir=${oops}"), ("-m", "method=gf2", "hydra.sweep.dir=${oops}")):
        p = run_sweep(*args, cwd=tmp_path)
        key = args[-1].partition("=")[0]
        said = f"sweep: config error: {key}=${{oops}} cannot be resolved: Interpolation key 'oops' not found\n"
        assert (p.returncode, p.stderr, p.stdout) == (2, said, ""), p.stderr[-3000:]
    db = sqlite3.connect(store.removeprefix("sqlite:///"))
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_a_key_longer_than_mlflow_keeps_is_refused_before_hydra_reads_it():
    """`+extra.<246 characters>=1` ran the job, whose result no store took (MLflow: 'Param key' exceeds the maximum
    length of 250 characters), kept in the spool and failing again at every later command; 300 characters was
    Hydra's traceback (`File name too long`, as it looks for a config group of that name)."""
    for n in (246, 300):
        with pytest.raises(Refusal) as e:
            check_command(["method=gf2", f"+extra.{'k' * n}=1"])
        assert e.value.line == (
            f"config error: extra.{'k' * 34}... ({n + 6} characters) is too long: expected a key of at most 250 "
            "characters (MLflow's limit for a param's name)"
        )
    assert check_command([f"+extra.{'k' * 244}=1"]) == [f"+extra.{'k' * 244}=1"]


def test_an_at_sign_in_a_key_or_a_groups_choice_is_one_line(store, tmp_path):
    """'@' names the package a group's option goes to: `+extra.a@b=1` and `problem@x=chars` were Hydra's
    ConfigCompositionException tracebacks (37 and 42 lines, exit 1)."""
    with pytest.raises(Refusal, match=r"^config error: problem@x=chars would put problem's option elsewhere"):
        check_command(["problem@x=chars"])
    p = run_sweep("method=gf2", "+extra.a@b=1", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr == (
        "sweep: config error: +extra.a@b=1 is read as a config group's choice ('@' names where it goes), and there "
        "is no group extra.a: a key's name takes no '@'; the groups: device, method, problem, sweeps, tracker, "
        "variant\n"
    ), p.stderr


def test_an_unquoted_value_that_is_not_ascii_is_one_line_that_shows_it_quoted():
    """Hydra's grammar reads only ASCII outside quotes (`mlflow.experiment=éxp` is a lexer error): the line says
    how to write it, as it does for a value that holds brackets."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from sweep.preflight.composition import explain

    with pytest.raises(OverrideParseException) as raised:
        OverridesParser.create().parse_overrides(["mlflow.experiment=éxp"])
    line = explain(raised.value).line
    assert line.startswith("config error: mlflow.experiment=éxp is not an override Hydra can read"), line
    assert line.endswith("""(quote a value that is not ASCII: 'mlflow.experiment="éxp"')"""), line
    OverridesParser.create().parse_overrides(['mlflow.experiment="éxp"'])  # what it shows is read


def test_a_tilde_of_another_users_home_is_told_quoted_not_as_home():
    """`problem.path=~alice/data` is alice's home, which $HOME is not: the line said `problem.path=$HOMEalice/data`
    (a variable of that name, empty); the quoted value is read (problem.path expands it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from sweep.preflight.composition import explain

    for value, said in (
        ("~alice/data", """write 'problem.path="~alice/data"')"""),
        ("~/data", """write problem.path=$HOME/data, or 'problem.path="~/data"')"""),
    ):
        with pytest.raises(OverrideParseException) as raised:
            OverridesParser.create().parse_overrides([f"problem.path={value}"])
        line = explain(raised.value).line
        assert line.endswith(f"(a ~ after problem.path= is not expanded by the shell: {said}"), line
        OverridesParser.create().parse_overrides([f'problem.path="{value}"'])  # what it shows is read


def test_a_bool_field_takes_true_or_false_only(store, tmp_path):
    """OmegaConf reads any integer but 0 as true, and yes / on / y too: `mlflow.force=2` re-ran a recorded job,
    `device.local_gpu=1` and `hydra.launcher.force=2` were on, `mlflow.enabled=0` off, without a word. Every bool
    field (the job's, the launcher's) is one line naming it, before any job."""
    cases = {
        ("mlflow.force=2",): "mlflow.force=2 is not allowed: expected true or false",
        ("mlflow.force=ture",): "mlflow.force=ture is not allowed: did you mean true? expected true or false",
        ("device.local_gpu=1",): "device.local_gpu=1 is not allowed: expected true or false",
        ("method=gpt", "method.checkpoint=on"): "method.checkpoint=on is not allowed: expected true or false",
        ("-m", "hydra.launcher.force=2"): "hydra.launcher.force=2 is not allowed: expected true or false",
        ("-m", "hydra.launcher.fast=3"): "hydra.launcher.fast=3 is not allowed: expected true or false or null",
        ("-m", "mlflow.force=true,0"): "mlflow.force=0 is not allowed: expected true or false",
        ("-m", "mlflow.force='yes',true"): "mlflow.force=yes is not allowed: expected true or false",
        ("-m", "mlflow.force=range(0,2)"): "mlflow.force=range(0,2) is not allowed: expected true or false",
        ("++mlflow.enabled=0",): "mlflow.enabled=0 is not allowed: expected true or false",
    }
    for argv, line in cases.items():
        with pytest.raises(Refusal) as e:
            check_command(list(argv))
        assert e.value.line == f"config error: {line}", argv
    for fine in (["mlflow.force=true"], ["-m", "mlflow.force=True,'false'"], ["-m", "hydra.launcher.fast=null"]):
        assert check_command(fine)
    p = run_sweep("method=gf2", "mlflow.force=2", cwd=tmp_path)
    assert (p.returncode, p.stderr) == (
        2,
        "sweep: config error: mlflow.force=2 is not allowed: expected true or false\n",
    )
    db = sqlite3.connect(store.removeprefix("sqlite:///"))
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def refused_alike(cases: dict, runs: dict, tmp_path) -> None:
    """Each command line of `cases` refused by check_command with its line's start, and each of `runs` run as a
    user would: exit 2, that one line (`config error: ...`), nothing finished."""
    for argv, line in cases.items():
        with pytest.raises(Refusal) as e:
            check_command(list(argv))
        assert e.value.line.startswith(f"config error: {line}"), (argv, e.value.line)
    for args, line in runs.items():
        p = run_sweep(*args, cwd=tmp_path)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, (args, p.stderr[-3000:])
        assert p.stderr.startswith(f"sweep: {line}") and "[FINISHED]" not in p.stdout, (args, p.stderr)


def test_an_interpolation_or_a_text_field_keeps_the_type_it_was_given(store, tmp_path):
    """A prober's round: `mlflow.force=${problem.seed}` ran as true (OmegaConf converts 42 for a bool field),
    `mlflow.experiment=true` recorded into an experiment named 'True' (Hydra reads a boolean, OmegaConf writes it
    back capitalised), `hydra.job.name=${oops}` was a traceback from Hydra's logging set-up. Each is one line naming
    the key, before any job, on a single run, the project's launcher and Hydra's basic one; nothing recorded."""
    cases = {
        ("mlflow.experiment=true",): "mlflow.experiment=true is read as a boolean and would be written 'True': "
        "expected text; quote it to keep it as typed: 'mlflow.experiment=\"true\"'",
        ("-m", "run_name=a,1e3"): "run_name=1e3 is read as a number and would be written '1000.0'",
    }
    for fine in (["mlflow.experiment='true'"], ["mlflow.experiment=42"], ["-m", "run_name=a,'1e3'"]):
        assert check_command(fine)
    force = "mlflow.force=${problem.seed} resolves to 42, which is not allowed: expected true or false"
    runs = {
        ("method=gf2", "mlflow.force=${problem.seed}"): f"config error: {force}",
        ("-m", "method=gf2", "hydra.job.name=${oops}"): "config error: hydra.job.name=${oops} cannot be resolved: "
        "Interpolation key 'oops' not found",
        ("-m", "method=gf2", "hydra.launcher.force=${problem.seed}"): "config error: hydra.launcher.force="
        "${problem.seed} resolves to 42, which is not allowed: expected true or false",
        ("-m", "method=gf2", "mlflow.force='${problem.seed}',true"): f"config error in job force='${{problem.seed}}': "
        f"{force}",
        ("-m", "hydra/launcher=basic", "method=gf2", "run_name=${mlflow.enabled}"): "config error: "
        "run_name=${mlflow.enabled} resolves to True, which is not allowed: expected text",
        ("-m", "method=gf2", "hydra.job.name=${hydra:runtime.choices.method}"): "config error: hydra.job.name=${hydra:"
        "runtime.choices.method} cannot be resolved: ValueError raised while resolving interpolation: HydraConfig "
        "was not set (a sweep names its jobs before any has Hydra's config: give a name)",  # (was a traceback)
    }
    refused_alike(cases, runs, tmp_path)
    # what Hydra resolves as the job starts is the job's: a single run's `${hydra:...}` name, a sweep's run names
    for args in (
        ("method=gf2", "hydra.job.name=${hydra:runtime.choices.method}"),
        ("-m", "method=gf2", "problem.seed=1,2", "run_name=${hydra:job.override_dirname}"),
    ):
        p = run_sweep(*args, "mlflow.enabled=false", cwd=tmp_path)
        assert p.returncode == 0 and "[FINISHED]" in p.stdout, (args, p.stderr[-3000:])
    db = sqlite3.connect(store.removeprefix("sqlite:///"))
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM experiments WHERE name = 'True'").fetchone()[0] == 0


def test_an_added_removed_or_mapped_key_that_no_job_can_take_is_one_line(store, tmp_path):
    """A prober's round: `+mlflow.experimnet=x` and `+challenge.seedz=1` were added past the schema and read by
    nothing (the runs went to 'sweep'), `method={}` ran the default method, `~mlflow` was three lines of the store
    check, `~run_name` and `~extra.repeat` Hydra's traceback, `+problem.n_bits=5` its multi-line advice (exit 1),
    and `hydra.job.name=a/b` logging's traceback (a sweep: every job failed with it)."""
    cases = {
        ("+mlflow.experimnet=x",): "mlflow.experimnet is not a key of mlflow: did you mean experiment?",
        ("+challenge.seedz=1",): "challenge.seedz is not a key of challenge: did you mean seeds?",
        ("method={}",): "method={} chooses no option of method, and every job takes one: expected one of bigram,",
        ("-m", "hydra/launcher={a:1}"): "hydra/launcher={a:1} is a mapping, and hydra/launcher takes an option's name",
        ("~mlflow",): "~mlflow would remove mlflow, which every job's config has: set it instead",
        ("~run_name",): "~run_name would remove run_name, which every job's config has",
        ("-m", "hydra.sweeper.params.problem.seed='1,2'"): "hydra.sweeper.params.problem.seed='1,2' sets the basic "
        "sweeper's params, which only a preset's file sets: sweep the key itself, problem.seed=1,2 -m",  # (traceback)
    }
    for fine in (["+compare.baseline.x=1"], ["+extra.note=a"], ["method={hidden:100}"]):
        assert check_command(fine)
    runs = {
        ("method=gf2", "+problem.n_bits=5"): "+problem.n_bits adds a key that is already there: set it as "
        "problem.n_bits=...",
        ("method=gf2", "~extra.repeat"): "~extra.repeat removes a key that is not set: leave it out",
        ("-m", "method=gf2", "hydra.job.name=a/b"): "hydra.job.name=a/b is not allowed: expected a file name",
        ("-m", "method=gf2", "hydra.job.name=a,b"): "hydra.job.name=a,b sweeps a setting of Hydra's, which takes one "
        "value a command: give it one value",  # (Hydra's traceback)
    }
    refused_alike(cases, {args: f"config error: {line}" for args, line in runs.items()}, tmp_path)
    db = sqlite3.connect(store.removeprefix("sqlite:///"))
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_a_grid_with_a_config_twice_or_a_sweep_function_misread_is_one_line(store, tmp_path):
    """A prober's round: `problem.seed=5,5 -m` ran and recorded the same config twice (`seed=5`, `seed=5 #1`), on
    the project's launcher; `problem.seed=range()` was told to quote the value, which would make the seed the text
    'range()'. A search (optuna) may draw a config twice: only a grid is refused."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from sweep.preflight.composition import explain

    for value, said in (("choice()", "choice(a,b,...): one value or more"), ("range(1,2,3,4)", "range(stop), ")):
        with pytest.raises(OverrideParseException) as raised:
            OverridesParser.create().parse_overrides([f"problem.seed={value}"])
        line = explain(raised.value).line
        assert f"(expected {said}" in line and "quote" not in line, line
    twice = "have the same config, and a sweep runs a config once: give each value once"
    runs = {
        ("-m", "method=gf2", "problem.seed=5,5"): f"config error: jobs seed=5 and seed=5 #1 {twice}",
        ("-m", "hydra/launcher=basic", "method=gf2", "problem.seed=5,6,5"): f"config error: jobs seed=5 and seed=5 #2 "
        f"{twice}",
    }
    refused_alike({}, runs, tmp_path)
    db = sqlite3.connect(store.removeprefix("sqlite:///"))
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_a_rounds_ranking_rules_are_checked_before_its_jobs(store, tmp_path):
    """A prober's round: `sweeps=char_challenge challenge.accuracy_floor=2` (or an energy budget of -1 J) ran the
    whole round, whose leaderboard then passed no entrant. Jobs do not read these rules; the round is refused."""
    from omegaconf import OmegaConf  # noqa: PLC0415

    from sweep.config.check import check_challenge  # noqa: PLC0415

    runs = {
        ("sweeps=char_challenge", "challenge.accuracy_floor=2"): "config error: challenge.accuracy_floor=2.0 is not "
        "allowed: expected a number from 0 to 1",
        ("method=gf2", "challenge.energy_budget_j=-1"): "config error: challenge.energy_budget_j=-1.0 is not allowed: "
        "expected a finite number of joules > 0, or null",
    }
    refused_alike({}, runs, tmp_path)
    for fine in ({"accuracy_floor": 0.4, "energy_budget_j": 10}, {"accuracy_floor": 0, "energy_budget_j": None}):
        check_challenge(OmegaConf.create({"challenge": fine}))
    db = sqlite3.connect(store.removeprefix("sqlite:///"))
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_a_name_typed_in_capitals_is_told_its_name():
    """A prober's round: `tracker.scope=ALL_STEPS` and `method=SGD` listed the names with no "did you mean"
    (difflib's ratio is case-sensitive: 'SGD' and 'sgd' share no character)."""
    from sweep.config.suggest import closest, expected  # noqa: PLC0415

    assert closest("ALL_STEPS", ["published", "init_sample0", "all_steps"]) == ["all_steps"]
    assert expected("SGD", ["sgd", "km"]) == "did you mean sgd? expected one of km, sgd"
    assert closest("sdg", ["sgd", "km"]) == ["sgd"] and closest("zzz", ["sgd", "km"]) == []
    assert closest("gpu", ["cpu", "cuda"]) == ["cuda"]  # a word meant as another name, as before


def test_a_name_too_long_for_the_filesystem_is_no_preset_in_every_command():
    """A prober's round: `sweep sweeps=<300 characters>` and `sweep-compare <300 characters>` were an OSError
    traceback (`File name too long`: Path.is_file raises ENAMETOOLONG), exit 1; each is now the command's own line
    for a name that is no preset (sweep.paths.preset_file, which every command asks)."""
    from sweep.paths import preset_file  # noqa: PLC0415
    from sweep.report.queries import _studies_instead  # noqa: PLC0415
    from sweep.report.study import study_settings  # noqa: PLC0415

    long = "x" * 300
    with pytest.raises(Refusal) as e:
        check_command([f"sweeps={long}"])
    assert e.value.line.startswith(f"config error: sweeps={long} is not a preset: expected one of ")
    assert _studies_instead(long, [], {}).startswith("expected a study or an experiment of the store, a preset")
    assert study_settings(long) == {}
    assert preset_file(long) is None and preset_file("../conf/config") is None and preset_file("tiled_w1")


def test_hydras_config_folder_and_name_flags_are_one_line(store, tmp_path):
    """A prober's round: -cn nosuch printed Hydra's config search path in a dozen lines; -cp /nonexistent, a
    relative -cp (Hydra reads it as a module beside the sweep package) and --config-dir /nonexistent were
    Hydra's tracebacks, exit 1; -cn method/sgd composed a group's option as the whole config and failed in the
    job with a traceback. Each is one line before Hydra starts, exit 2."""
    (tmp_path / "mine").mkdir()
    cases = {
        ("-cn", "confg"): "-cn confg is not a primary config of ",
        ("-cn", "method/sgd"): "-cn method/sgd is not a primary config of ",
        ("-cp", "/nonexistent"): "-cp /nonexistent is not a directory: expected the folder of the primary config",
        ("-cp", "mine"): f"-cp mine is relative, and Hydra reads a relative config path beside the sweep package, not "
        f"from the working directory: expected an absolute path: -cp {tmp_path / 'mine'}",
        ("-cp", str(tmp_path / "mine")): f"-cp {tmp_path / 'mine'} holds no config.yaml, the primary config read: ",
        ("--config-dir", "/nonexistent"): "--config-dir /nonexistent is not a directory: expected a folder of configs",
    }
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        for argv, line in cases.items():
            with pytest.raises(Refusal) as e:
                check_command(list(argv))
            assert e.value.line.startswith(line), (argv, e.value.line)
    finally:
        os.chdir(here)
    assert "did you mean config?" in str(pytest.raises(Refusal, check_command, ["-cn", "confg"]).value)
    p = run_sweep("-cn", "method/sgd", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert check_command(["-cn", "config", "method=gf2"]) and check_command(["--config-dir", str(tmp_path)])
    p = run_sweep("method=gf2", cwd=tmp_path, env={"SWEEP_ROOT": str(tmp_path / "nowhere")})  # (was "-cp None ...")
    assert p.returncode == 2 and p.stderr == (
        f"sweep: {tmp_path / 'nowhere' / 'conf'} (the project's conf/) holds no config.yaml, the primary config "
        f"read: expected a folder that holds one (it holds none); SWEEP_ROOT={tmp_path / 'nowhere'} names the "
        "project's root\n"
    )


def test_a_value_with_a_line_break_is_refused_in_one_line(store, tmp_path):
    """A prober's round: a pasted value with a line break (mlflow.experiment=$'a\\nb') was refused in two lines,
    the value printed as given; now escaped, with how Hydra reads it."""
    p = run_sweep("method=gf2", "mlflow.experiment=a\nb", cwd=tmp_path)
    assert (p.returncode, p.stderr) == (
        2,
        "sweep: config error: mlflow.experiment=a\\nb is not an override Hydra can read: LexerNoViableAltException "
        "(a line break or another control character is read only inside quotes)\n",
    )
