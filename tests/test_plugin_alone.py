"""The launcher plugin is generic: a plain Hydra app, with `sweep`, `modal` and `optuna` unimportable in every
process it starts, runs a multirun on `hydra/launcher=local`; a job placed on Modal without the modal package
fails with how to install it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import run_plain_app

# one write per line: with PYTHONUNBUFFERED set (as on CI), print() writes its text and its newline apart, and
# two workers sharing the pipe may interleave between them
APP = """
import sys

import hydra


@hydra.main(version_base=None, config_path=None)
def main(cfg):
    sys.stdout.write(f"job x={cfg.x} doubled={2 * cfg.x}\\n")
    return 2 * cfg.x


main()
"""


def run_app(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    return run_plain_app(tmp_path, APP, *overrides)


def test_a_plain_hydra_app_sweeps_on_the_local_launcher_without_sweep_or_modal(tmp_path: Path) -> None:
    p = run_app(tmp_path, "hydra/launcher=local", "hydra.launcher.n_workers=2", "+x=1,2,3")
    assert p.returncode == 0, p.stderr[-2000:]
    assert sorted(line for line in p.stdout.splitlines() if line.startswith("job ")) == [
        "job x=1 doubled=2",
        "job x=2 doubled=4",
        "job x=3 doubled=6",
    ]
    # Hydra's per-job record, as any launcher writes it
    assert sorted(
        (tmp_path / "multirun" / str(i) / ".hydra" / "overrides.yaml").read_text().split()[-1] for i in range(3)
    ) == ["+x=1", "+x=2", "+x=3"]


def test_a_job_placed_on_modal_without_the_modal_package_fails_with_how_to_install_it(tmp_path: Path) -> None:
    p = run_app(tmp_path, "hydra/launcher=modal", "hydra.launcher.modal.offline=true", "+x=1")
    assert p.returncode != 0
    assert "pip install 'sweep-launcher[modal]'" in p.stderr, p.stderr[-2000:]
    assert "job x=1" not in p.stdout
