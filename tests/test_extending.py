"""docs/extending.md, followed as a newcomer would: its code blocks written into a copy of the project (a block
whose info string names a file makes it; one that also names an anchor goes in after the line starting with it), then
its command run there, recorded in a store of the test's own."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

DOC = ROOT / "docs" / "extending.md"
BLOCK = re.compile(r"^```(\S+)[ \t]*(.*?)\n(.*?)^```$", re.M | re.S)


def blocks() -> list[tuple[str, str, str]]:
    """(language, info after it, body) of every fenced block of the page, in order."""
    return [(m[1], m[2].strip(), m[3]) for m in BLOCK.finditer(DOC.read_text())]


def follow(project: Path) -> list[str]:
    """Apply the page's file blocks to `project`; the command lines of its console blocks (without `$ `) and the
    output lines shown after each."""
    shown = []
    for lang, info, body in blocks():
        if lang == "console":
            shown += body.splitlines()
            continue
        if not info:
            continue
        path, _, anchor = info.partition(" ")
        target = project / path
        if not anchor:
            assert not target.exists(), f"{path}: the page makes a file the project already has"
            target.write_text(body)
            continue
        lines = target.read_text().splitlines(keepends=True)
        at = [i for i, line in enumerate(lines) if line.strip().startswith(anchor)]
        assert len(at) == 1, f"{path}: the anchor {anchor!r} is on {len(at)} lines, not one"
        lines[at[0] + 1 : at[0] + 1] = [body]
        target.write_text("".join(lines))
    return shown


def test_the_extending_page_adds_a_method_a_tracker_and_a_metric_that_a_real_run_records(store, tmp_path):
    project = tmp_path / "project"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "src" / "sweep", project / "src" / "sweep", ignore=ignore)
    shutil.copytree(ROOT / "conf", project / "conf", ignore=ignore)
    shown = follow(project)
    command, expected = shown[0], shown[1]
    assert command.startswith("$ python -m sweep "), command

    env = {**os.environ, "PYTHONPATH": str(project / "src"), "SWEEP_ROOT": str(project)}
    args = [sys.executable, *shlex.split(command[len("$ python ") :])]
    p = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(x for x in p.stdout.splitlines() if x.startswith("[FINISHED]"))
    # the page's line: the same figures in the same order, each the same but for what varies from run to run (...)
    assert [t.split("=")[0] for t in line.split()] == [t.split("=")[0] for t in expected.split()], (expected, line)
    fixed = [t for t in expected.split() if "..." not in t]
    assert [t for t in line.split() if t in fixed] == fixed, (expected, line)

    from mlflow import MlflowClient

    client = MlflowClient(store)
    run = client.search_runs([client.get_experiment_by_name("sweep").experiment_id])[0]
    assert run.info.status == "FINISHED"
    assert run.data.params["method._target_"] == "sweep.methods.brute.Brute"
    assert run.data.params["tracker._target_"] == "sweep.trackers.footprint.FootprintTracker"
    metrics = run.data.metrics
    assert metrics["accuracy"] == 1.0 and metrics["secret_correct"] == 1.0
    # x's 64 rows of 20 bits and y's 64 labels, each written once: the tracker's figure of the method's trace
    assert metrics["footprint_floats"] == 64 * 20 + 64
    assert f"subsets_tried={metrics['subsets_tried']:.0f}" in line
