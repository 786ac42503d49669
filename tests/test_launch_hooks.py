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
                if j.cfg.x == 9:
                    raise RuntimeError("a bug in the app's plan")
                yield j.idx, JobPlan(done=j.cfg.x == 0)  # x=0: "already done"
                prev = j

        def job_ended(self, job, outcome):
            print(f"ENDED x={job.cfg.x} {outcome.status} value={outcome.value} pid={os.getpid()}", flush=True)

        def sweep_ended(self, status, tally, note=""):  # what the app closes at the end (a parent run)
            print(f"SWEEP_ENDED {status}", flush=True)
            super().sweep_ended(status, tally, note)

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

    p = app(tmp_path, "hydra/launcher=local", "x=1,9")  # a bug, not a refusal: the app still closes what it opened
    assert p.returncode == 1 and "a bug in the app's plan" in p.stderr, p.stderr
    assert "SWEEP_ENDED FAILED" in p.stdout and "ENDED x=" not in p.stdout


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


PLANS = textwrap.dedent("""
    from hydra_plugins.sweep_launcher.api import Backend, JobPlan, LaunchHooks, Unready

    class Hooks(LaunchHooks):
        def plan(self, jobs):  # one answer per job; x=0 is not planned: it runs here, alone, without a limit
            for j in jobs:
                x = j.cfg.x
                if x == 1:
                    yield j.idx, JobPlan(skip="another sweep runs it")
                elif x in (2, 3):
                    yield j.idx, JobPlan(batch_key="pair", batch=2)
                elif x == 4:
                    yield j.idx, JobPlan(time_limit_s=1)
                elif x == 5:
                    yield j.idx, JobPlan(where="closed", instead=lambda: "run them here with x=0")

        def run_batch(self, cfgs):
            return [f"batch of {len(cfgs)}: {c.x}" for c in cfgs]

        def job_ended(self, job, outcome):
            print(f"ENDED x={job.cfg.x} {outcome.status} value={outcome.value}", flush=True)

    class Closed(Backend):  # installed, but cannot take jobs from here now
        def unready(self):
            return Unready("it is closed", "open it", "{n} job(s) placed where it is closed: {instead}", "wait")

        def run(self, units, reply, stop):
            raise AssertionError("a closed backend was given jobs")
""")
SLOW_APP = APP.replace(
    "    return cfg.x * 10", "    if cfg.x == 4:\n        __import__('time').sleep(60)\n    return cfg.x * 10"
)
BACKEND = "  launcher:\n    backends:\n      closed:\n        _target_: apphooks.Closed\n"


def test_one_plan_per_job_places_skips_batches_and_limits_it(tmp_path):
    (tmp_path / "apphooks.py").write_text(PLANS)
    (tmp_path / "app.py").write_text(SLOW_APP)
    config = "defaults:\n  - override hydra/launcher: sweep\n  - _self_\n" + CONFIG + BACKEND
    (tmp_path / "config.yaml").write_text(config)

    def app(xs: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "app.py", "-m", f"x={xs}", "hydra.launcher.progress=false"]
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=dict(os.environ))

    p = app("0,1,2,3,4,5")
    assert p.returncode == 1, p.stdout + p.stderr  # x=4 ran past its limit
    ended = sorted(ln for ln in p.stdout.splitlines() if ln.startswith("ENDED"))
    assert ended[:3] == [
        "ENDED x=0 FINISHED value=0",
        "ENDED x=2 FINISHED value=batch of 2: 2",
        "ENDED x=3 FINISHED value=batch of 2: 3",
    ], p.stdout
    assert ended[3].startswith("ENDED x=4 FAILED") and len(ended) == 4, ended  # x=1 skipped, x=5 left out
    assert "ran past the time limit of 1 s" in p.stderr
    assert "sweep: skipping 1 job(s): another sweep runs it" in p.stdout
    assert "sweep: leaving out 1 job(s), x=5: it is closed; to run them, open it and run this command again" in p.stdout

    p = app("5")  # every job on the closed backend: refused before any job, with the plan's advice first
    assert p.returncode == 2 and "ENDED" not in p.stdout, p.stdout + p.stderr
    assert p.stderr.strip() == "sweep: 1 job(s) placed where it is closed: run them here with x=0"
