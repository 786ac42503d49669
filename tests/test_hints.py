"""The commands a sweep prints as hints work when pasted into the shell the README leaves the user in (the
project's .venv not activated: `python` and `sweep` are not the project's)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hydra_plugins.sweep_launcher import commands
from tests.conftest import ROOT, run_sweep

VENV_BIN = Path(sys.executable).parent


def _shell(command: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _hint(out: str, prefix: str) -> str:
    return next(ln for ln in out.splitlines() if ln.startswith(prefix))


def _without_venv() -> dict:
    return {
        **os.environ,
        "PATH": os.pathsep.join(
            p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != VENV_BIN.resolve()
        ),
    }


# each place and each form once (the suite's time: a case is six commands)
@pytest.mark.parametrize("where, form", [("project root", "-m first"), ("elsewhere", "-m last")])
def test_printed_commands_work_pasted_without_the_venv(store, tmp_path, where, form):
    """A sweep from the project root (`.venv/bin/...` hints) or another directory (absolute paths), with a PATH
    that has no project interpreter, written with `-m` first or last (the README's form): its `next:` commands,
    and the re-run command of the resumed sweep, run from the same directory through bash; so does an override
    appended to the command as written (what every hint does)."""
    cwd = ROOT if where == "project root" else tmp_path
    env = _without_venv()
    args = ("method=gf2,km", f"hydra.sweep.dir={tmp_path / 'multirun'}")
    sweep = ("-m", *args) if form == "-m first" else (*args, "-m")
    p = run_sweep(*sweep, cwd=cwd, env=env)
    assert p.returncode == 0, p.stderr
    compare, ui = _hint(p.stdout, "next: ")[len("next: ") :].split("  →  ")[0].split("  ·  ")
    if VENV_BIN.is_relative_to(cwd):  # from the project's root: the venv's scripts by their relative path
        assert compare.startswith(str(VENV_BIN.relative_to(cwd) / "sweep-compare"))
    assert "python -m" not in compare + ui
    shown = _shell(f"{compare} --out {tmp_path / 'compare'}", cwd, env)  # (its files: not in the project)
    assert shown.returncode == 0 and "method" in shown.stdout and "km" in shown.stdout, shown.stderr
    assert _shell(f"{ui} --help", cwd, env).returncode == 0

    again = run_sweep(*sweep, cwd=cwd, env=env)
    rerun = _hint(again.stdout + again.stderr, "sweep: 0 job(s) finished").split("re-runs them: ")[1]
    rerun = rerun.split("); parent run")[0]
    done = _shell(rerun, cwd, env)
    assert done.returncode == 0 and "sweep: 2 job(s) finished, 0 failed, 0 skipped" in done.stdout, done.stderr
    appended = run_sweep(*sweep, "mlflow.force=true", "hydra.launcher.n_workers=1", cwd=cwd, env=env)
    assert appended.returncode == 0 and "sweep: 2 job(s) finished" in appended.stdout, appended.stderr[-2000:]


@pytest.mark.new_store
def test_a_single_runs_lines_say_where_it_went_and_work_pasted(store, tmp_path):
    """The first run (its store made by it) says where it was recorded and how to look at it, and nothing of
    MLflow's; its repeat, how to record another: each command runs pasted from another directory without the
    venv."""
    env = _without_venv()
    first = run_sweep("method=gf2", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert "INFO" not in first.stderr  # MLflow's lines as it makes the store: the line below says it
    recorded = _hint(first.stdout, "recorded in ")
    assert recorded.startswith("recorded in experiment 'sweep' of mlruns/mlflow.db; see it: ")  # (from its directory)
    ui = recorded.split("see it: ")[1].split("  →  ")[0]
    assert "python -m" not in ui and _shell(f"{ui} --help", tmp_path, env).returncode == 0
    again = run_sweep("method=gf2", cwd=tmp_path, env=env)
    repeat = _hint(again.stdout, "sweep: already recorded").split("records a repeat: ")[1].rstrip(")")
    done = _shell(repeat, tmp_path, env)
    assert done.returncode == 0 and "[FINISHED] gf2-standard-cpu-seed42-repeat1 " in done.stdout, done.stderr


def test_a_script_on_path_is_named_bare_and_a_module_without_one_by_this_interpreter(monkeypatch, tmp_path):
    """The one helper's choices: the bare name when PATH finds this very script, else its path; a module with no
    console script runs with this interpreter's own path (a bare `python` may be another one)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}/usr/bin:/bin")
    assert commands.command("sweep.compare", "tiled w1") == "sweep-compare 'tiled w1'"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert commands.command("sweep.ui") == str(VENV_BIN / "sweep-ui")
    assert commands.command("sweep.methods.applicability") == f"{sys.executable} -m sweep.methods.applicability"
    assert shutil.which("sweep-ui") is None


def test_a_commands_one_line_begins_with_the_name_the_user_typed(tmp_path):
    """Issue 43: the one-line errors began with `sweep.compare:`, `sweep.store migrate:`, `sweep.ui:`... whatever the
    user typed, and `sweep-rescore:` even under `python -m sweep.rescore`. Now the console script's name however
    its path is given, `python -m <module>` where it runs so (`commands.prog`, each command's first word)."""
    memory = "an in-memory SQLite store keeps nothing once the command ends"
    for argv, said in (
        ([str(VENV_BIN / "sweep-compare"), "x", "--tracking-uri", "sqlite://"], "sweep-compare: store sqlite://: "),
        (
            [sys.executable, "-m", "sweep.rescore", "x", "tracker=dmd", "--tracking-uri", "sqlite://"],
            "python -m sweep.rescore: store sqlite://: ",
        ),
        (
            [str(VENV_BIN / "sweep-store"), "migrate", "--from", "sqlite://", "--to", "sqlite://"],
            "sweep-store migrate: ",
        ),
    ):
        p = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and p.stderr.startswith(said) and memory in p.stderr, (argv, p.stderr)
        assert p.stderr.count("\n") == 1, p.stderr


def test_a_misspelt_option_or_choice_is_one_line_with_the_one_meant(capsys):
    """A prober's round of issue 43: `sweep-compare demo --no-plots`, `sweep-ui --prot 5000`, `sweep-spool imprt`
    printed argparse's usage block and a last line that named no option; sweep-store's named no choice."""
    from sweep.report.compare import main as compare  # noqa: PLC0415 - each command's own parser
    from sweep.report.ui import main as ui  # noqa: PLC0415
    from sweep.spool import main as spool  # noqa: PLC0415
    from sweep.store.__main__ import main as store  # noqa: PLC0415

    for main, argv, said in (
        (compare, ["demo", "--no-plots"], "sweep-compare: unrecognized arguments: --no-plots "
         "(did you mean --no-plot?)"),
        (ui, ["--prot", "5000"], "sweep-ui: unrecognized arguments: --prot (did you mean --port?)"),
        (spool, ["imprt"], "sweep-spool: argument action: invalid choice: 'imprt' (choose from 'list', 'import') "
         "(did you mean import?)"),
        (store, ["migrat", "--from", "a", "--to", "b"], "sweep-store: argument action: invalid choice: "
         "'migrat' (choose from 'migrate') (did you mean migrate?)"),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.startswith(f"{said} (see ") and err.endswith(" --help)\n"), err
        assert err.count("\n") == 1, err


def test_an_option_given_an_empty_value_is_one_line(capsys):
    """Issue 43, seventh round: `sweep-compare demo --tracking-uri=` (a script's unset variable) read the project's
    store, not one the user named; `--out=` wrote the table into the current directory; `sweep-server
    --admin-password-file=` said ". : Is a directory"."""
    from sweep.report.compare import main as compare  # noqa: PLC0415 - each command's own parser
    from sweep.report.ui import main as ui  # noqa: PLC0415
    from sweep.rescore.__main__ import main as rescore  # noqa: PLC0415
    from sweep.store.__main__ import main as store  # noqa: PLC0415

    for main, argv, said in (
        (compare, ["demo", "--tracking-uri="], "sweep-compare: --tracking-uri is empty: expected a value (without "
         "the option: its default)"),
        (compare, ["demo", "--out", ""], "sweep-compare: --out is empty: expected a value (without the option: its "
         "default)"),
        (ui, ["demo", "--tracking-uri", ""], "sweep-ui: --tracking-uri is empty"),
        (rescore, ["--tracking-uri=", "abc", "tracker=ard"], "sweep-rescore: --tracking-uri is empty"),
        (store, ["migrate", "--from=", "--to", "b"], "sweep-store migrate: --from is empty: expected a value (see "),
        # argparse's abbreviation of an option is that option ('' was read as the address)
        (compare, ["demo", "--tracking="], "sweep-compare: --tracking-uri is empty: expected a value (without "),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.startswith(said) and err.endswith(" --help)\n"), err
        assert err.count("\n") == 1, err
    from sweep.arguments import Parser  # noqa: PLC0415

    ap = Parser("x", prog="x")
    ap.add_argument("--out")
    ap.add_argument("words", nargs="*")
    assert ap.parse_args(["--", "--out", ""]).words == ["--out", ""]  # after `--`: positional, no option's value
