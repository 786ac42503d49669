"""sweep.preflight: every refusal before a job, in one place, on every path."""

from __future__ import annotations

import pytest

from sweep.preflight.command import check_command
from sweep.preflight.refusal import Refusal
from tests.conftest import run_sweep


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
