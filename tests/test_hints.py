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


@pytest.mark.parametrize("where", ["project root", "elsewhere"])
def test_printed_commands_work_pasted_without_the_venv(store, tmp_path, where):
    """A sweep from the project root (`.venv/bin/...` hints) or another directory (absolute paths), with a PATH
    that has no project interpreter: its `next:` commands, and the re-run command of the resumed sweep, run
    from the same directory through bash."""
    cwd = ROOT if where == "project root" else tmp_path
    env = {
        **os.environ,
        "PATH": os.pathsep.join(
            p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != VENV_BIN.resolve()
        ),
    }
    sweep = ("-m", "method=gf2,km", f"hydra.sweep.dir={tmp_path / 'multirun'}")
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
