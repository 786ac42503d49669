"""docs/extending.md, "Add a launcher backend": the page's backend, as written there, runs a small sweep of a plain
Hydra app, each job in a process of its own, its results back in the launching process; a misspelt route is
one line naming the allowed ones, exit 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

# each job says its process and the launching process's (inherited through the environment)
APP = """import os, hydra
@hydra.main(version_base=None, config_path=".", config_name="config")
def main(cfg):
    print(f"JOB x={cfg.x} pid={os.getpid()} launcher={os.environ['LAUNCHER_PID']}", flush=True)
    assert cfg.x != 3, "three"
    return cfg.x * 10
if __name__ == "__main__":
    os.environ["LAUNCHER_PID"] = str(os.getpid())
    main()
"""
HOOKS = textwrap.dedent("""
    from hydra_plugins.sweep_launcher.api import LaunchHooks

    class Hooks(LaunchHooks):
        def job_ended(self, job, outcome):
            print(f"ENDED x={job.overrides[0]} {outcome.status} value={outcome.value}", flush=True)
""")


def page_blocks(lang: str) -> list[str]:
    text = (ROOT / "docs" / "extending.md").read_text()
    section = text.split("## Add a launcher backend", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def test_the_pages_backend_runs_a_sweep_each_job_in_a_process_of_its_own(tmp_path):
    (code,), (config,) = page_blocks("python"), page_blocks("yaml")
    (tmp_path / "mybackend.py").write_text(code)
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "apphooks.py").write_text(HOOKS)
    config += "  callbacks:\n    h:\n      _target_: apphooks.Hooks\nx: 0\n"
    (tmp_path / "config.yaml").write_text(config)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def app(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "app.py", "-m", "x=1,2,3", "hydra.launcher.progress=false", *args]
        return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    p = app("hydra.launcher.route=process")
    jobs = {x: (pid, launcher) for x, pid, launcher in re.findall(r"JOB x=(\d) pid=(\d+) launcher=(\d+)", p.stdout)}
    assert sorted(jobs) == ["1", "2", "3"], p.stdout + p.stderr
    assert all(pid != launcher for pid, launcher in jobs.values())  # not in the launching process
    assert len({pid for pid, _ in jobs.values()}) == 3  # each job in a process of its own
    ended = sorted(re.findall(r"ENDED x=x=(\d) (\w+) value=(.*)", p.stdout))
    assert ended[:2] == [("1", "FINISHED", "10"), ("2", "FINISHED", "20")], p.stdout
    assert ended[2][:2] == ("3", "FAILED") and "three" in ended[2][2]
    assert p.returncode == 1 and "1 failed" in p.stdout + p.stderr  # LaunchHooks' summary: a failed job, exit 1

    bad = app("hydra.launcher.route=proces")
    assert bad.returncode == 2 and "JOB" not in bad.stdout
    assert "hydra.launcher.route='proces' is not allowed: expected device, local, modal or process" in bad.stderr
