"""docs/extending.md's example, followed as a newcomer would, in a copy of the project: its code blocks written in
order (a block whose info string names a file makes it; one that also names an anchor goes in after the line
starting with it), and each command it shows run when the page reaches it, recorded in a store of the test's own
and printing the line the page shows."""

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
SECTIONS = ("Add a method", "Add a tracker", "Add a metric")  # one example, followed in this order


def blocks() -> list[tuple[str, str, str]]:
    """(language, info after it, body) of every fenced block of the example's sections, in order."""
    sections = {part.partition("\n")[0].strip(): part for part in DOC.read_text().split("\n## ")[1:]}
    return [(m[1], m[2].strip(), m[3]) for title in SECTIONS for m in BLOCK.finditer(sections[title])]


def write(project: Path, info: str, body: str) -> None:
    path, _, anchor = info.partition(" ")
    target = project / path
    if not anchor:
        assert not target.exists(), f"{path}: the page makes a file the project already has"
        target.write_text(body)
        return
    lines = target.read_text().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.strip().startswith(anchor)]
    assert len(at) == 1, f"{path}: the anchor {anchor!r} starts {len(at)} lines, not one"
    lines[at[0] + 1 : at[0] + 1] = [body]
    target.write_text("".join(lines))


def run(project: Path, command: str, expected: str) -> str:
    """`command` (`$ .venv/bin/python -m sweep ...`) run in the project; its run's line, checked against the page's
    (or its refusal, `sweep: config error: ...`, the page's line whole: exit 2 before any job)."""
    assert command.startswith("$ .venv/bin/python -m sweep "), command
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "SWEEP_ROOT": str(project)}
    args = [sys.executable, *shlex.split(command[len("$ .venv/bin/python ") :])]
    refused = expected.startswith("sweep: config error: ")
    # (a size the method does not declare ran until killed: the refusal is given a minute, not the run's five)
    p = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=60 if refused else 300)
    if refused:
        assert (p.returncode, p.stderr.strip(), p.stdout) == (2, expected, ""), p.stderr[-3000:]
        return p.stderr.strip()
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(x for x in p.stdout.splitlines() if x.startswith("[FINISHED]"))
    # the same figures in the same order, each as the page has it but for what varies from run to run (...)
    assert [t.split("=")[0] for t in line.split()] == [t.split("=")[0] for t in expected.split()], (expected, line)
    fixed = [t for t in expected.split() if "..." not in t]
    assert [t for t in line.split() if t in fixed] == fixed, (expected, line)
    return line


def test_the_extending_page_adds_a_method_a_tracker_and_a_metric_that_real_runs_record(store, tmp_path):
    project = tmp_path / "project"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "src" / "sweep", project / "src" / "sweep", ignore=ignore)
    shutil.copytree(ROOT / "conf", project / "conf", ignore=ignore)
    lines = []
    for lang, info, body in blocks():
        if lang == "console":
            lines.append(run(project, *body.splitlines()))
        elif info:
            write(project, info, body)
    # the method under the default tracker; a size it refuses; then under the new tracker, with the new metric
    assert [line.split()[0] for line in lines] == ["[FINISHED]", "sweep:", "[FINISHED]"], lines

    from mlflow import MlflowClient

    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("sweep").experiment_id], order_by=["start_time"])
    assert [r.data.params["tracker._target_"].rpartition(".")[2] for r in runs] == ["ARDTracker", "FootprintTracker"]
    for r in runs:
        assert r.info.status == "FINISHED"
        assert r.data.params["method._target_"] == "sweep.methods.brute.Brute"
        assert r.data.metrics["accuracy"] == 1.0 and r.data.metrics["secret_correct"] == 1.0
    assert runs[0].data.metrics["subsets_tried"] == runs[1].data.metrics["subsets_tried"]
    assert runs[0].data.metrics["ard"] > 0
    # x's 64 rows of 20 bits and y's 64 labels, each written once: the tracker's figure of the method's trace
    assert runs[1].data.metrics["footprint_floats"] == 64 * 20 + 64
    assert f"subsets_tried={runs[1].data.metrics['subsets_tried']:.0f}" in lines[2]
