"""The launcher's one seam, from an app that is not `sweep`: a plain Hydra app with its own `LaunchHooks`
listed in `hydra.callbacks`, under the launcher (driven: plan, job_ended, sweep_ended in the launching process)
and under Hydra's basic launcher (an ordinary callback); the jobs reach `plan` as a stream. And the plugin
imports nothing of the sweep app."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import ROOT

HOOKS = textwrap.dedent("""
    import os
    from hydra_plugins.sweep_launcher.hooks import JobPlan, LaunchHooks, Refused

    class Hooks(LaunchHooks):
        def plan(self, jobs):  # a stream: each job composed in its turn, its config gone once the next is drawn
            prev = None
            for j in jobs:
                if prev is not None and prev.cfg is not None:
                    raise RuntimeError("a job's config outlived its turn")
                if j.cfg.x < 0:
                    raise Refused(f"app: x must be >= 0 (job {j.label()})")
                yield j.idx, JobPlan(done=j.cfg.x == 0)  # x=0: "already done"
                prev = j

        def job_ended(self, job, outcome):
            print(f"ENDED x={job.cfg.x} {outcome.status} value={outcome.value} pid={os.getpid()}", flush=True)

        def on_job_end(self, config, job_return, **kwargs):
            if not self.driven:
                print(f"HYDRA_JOB_END x={config.x} pid={os.getpid()}", flush=True)
""")
APP = textwrap.dedent("""
    import os
    import hydra

    @hydra.main(version_base=None, config_path=".", config_name="config")
    def main(cfg):
        if cfg.x == 3:
            raise ValueError("three")
        return cfg.x * 10

    if __name__ == "__main__":
        print(f"LAUNCHER pid={os.getpid()}", flush=True)
        main()
""")
CONFIG = "x: 1\nhydra:\n  callbacks:\n    h:\n      _target_: apphooks.Hooks\n"


def app(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    for name, text in (("apphooks.py", HOOKS), ("app.py", APP), ("config.yaml", CONFIG)):
        (tmp_path / name).write_text(text)
    return subprocess.run(
        [sys.executable, "app.py", "-m", *args, "hydra/job_logging=disabled", "hydra/hydra_logging=disabled"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )


def test_an_apps_hooks_are_driven_by_the_launcher_in_the_launching_process(tmp_path):
    p = app(tmp_path, "hydra/launcher=local", "x=0,1,2,3")
    assert p.returncode == 1, p.stderr  # x=3 failed: the default sweep_ended exits 1 after every job ran
    launcher_pid = re.search(r"LAUNCHER pid=(\d+)", p.stdout).group(1)
    ended = sorted(ln for ln in p.stdout.splitlines() if ln.startswith("ENDED"))
    assert ended == [
        f"ENDED x=1 FINISHED value=10 pid={launcher_pid}",
        f"ENDED x=2 FINISHED value=20 pid={launcher_pid}",
        f"ENDED x=3 FAILED value=three pid={launcher_pid}",
    ]  # value: the exception
    assert "HYDRA_JOB_END" not in p.stdout  # the hooks stand aside in the workers
    assert "skipping 1 job(s)" in p.stdout  # plan skipped x=0
    assert "sweep: 2 job(s) finished, 1 failed, 1 skipped" in p.stderr and "ValueError: three" in p.stderr

    p = app(tmp_path, "hydra/launcher=local", "x=1,-1")
    assert p.returncode == 2 and "app: x must be >= 0 (job x=-1)" in p.stderr
    assert "ENDED" not in p.stdout  # refused before any job started


def test_the_same_hooks_are_an_ordinary_callback_under_hydras_basic_launcher(tmp_path):
    p = app(tmp_path, "hydra/launcher=basic", "x=0,1")
    assert p.returncode == 0, p.stderr
    assert sorted(ln.split()[1] for ln in p.stdout.splitlines() if ln.startswith("HYDRA_JOB_END")) == ["x=0", "x=1"]
    assert "ENDED" not in p.stdout


def test_the_plugin_imports_nothing_of_the_app_and_no_hydra_internals_outside_the_fast_paths():
    plugin = ROOT / "launchers" / "hydra_plugins" / "sweep_launcher"
    for f in plugin.glob("*.py"):
        text = f.read_text()
        assert not re.search(r"^\s*(from|import) sweep\b", text, re.M), f
        if f.name not in ("_compose.py", "_run_job.py"):  # the version-gated fast paths
            assert "hydra._internal" not in text, f
