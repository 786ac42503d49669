"""The repository explains itself: no developer's machine paths, and every document it cites is in it
(docs/, the studies it names as "seed 00N" in docs/studies.md)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

SHIPPED = ("src", "launchers", "benchmarks", "conf", "sweeps", "docs", "README.md", "pyproject.toml", ".ci")
CODE = SHIPPED + ("tests",)
TEXT = {".py", ".yaml", ".yml", ".md", ".toml", ".txt", ".cfg", ".sh", ""}  # "": .ci/run, .ci/setup
# a temporary, home or checkout directory (`/tmp`, `/home/me/...`, macOS's `/private/var/...`, `C:\Users\...`)
MACHINE_PATH = re.compile(
    r"(?<![\w.~-])/(?:tmp|home|work|root|Users|mnt|scratch|private/var|var/folders)\b"
    r"|\b[A-Z]:\\+Users\b"
)
LEFT_BY_RUNS = {"__pycache__", "outputs", "multirun"}
SEED_REF = re.compile(r"\bseeds? (0\d\d(?:\s*(?:/|,|and|-|–|…)\s*0\d\d)*)", re.I)


def _files(tops: tuple[str, ...]) -> list[Path]:
    out = []
    for top in tops:
        p = ROOT / top
        paths = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
        # not what a command left where it ran (Hydra's outputs/ and multirun/, git-ignored at any depth: a run from
        # docs/ wrote docs/outputs/.../hydra.yaml, whose absolute paths failed the check below)
        out += [
            f for f in paths if f.suffix in TEXT and not LEFT_BY_RUNS & set(f.parts) and f.name != Path(__file__).name
        ]
    return out


def test_no_machine_paths_in_what_the_project_ships():
    found = [
        f"{f.relative_to(ROOT)}:{i}: {line.strip()}"
        for f in _files(SHIPPED)
        for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1)
        if MACHINE_PATH.search(line)
    ]
    assert not found, "absolute paths of a machine:\n" + "\n".join(found)


def test_every_cited_document_is_in_the_repository():
    studies = (ROOT / "docs" / "studies.md").read_text()
    sections = set(re.findall(r"^## seed (0\d\d)\b", studies, re.M))
    assert sections == {"000", "001", "002", "003", "004"}
    # the presets the studies' table names (its third column) are in sweeps/
    rows = re.findall(r"^\| \[0\d\d\].*$", studies, re.M)
    presets = [n for row in rows for n in re.findall(r"`(\w+)`", row.split("|")[3])]
    assert len(rows) == 5 and all((ROOT / "sweeps" / f"{n}.yaml").is_file() for n in presets), presets
    # and its table of the presets' sweeps has a row for each (char_challenge had none)
    table = studies.split("## The presets", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    shipped = {p.stem for p in (ROOT / "sweeps").glob("*.yaml")}
    assert listed == shipped, listed ^ shipped
    bad = []
    for f in _files(CODE):
        text = f.read_text(errors="replace")
        where = f.relative_to(ROOT)
        if re.search(r"\bspecs/|\.\./shared|shared/seeds", text):
            bad.append(f"{where}: points outside the repository (specs/, ../shared): point it at docs/")
        for group in SEED_REF.findall(text):
            bad += [
                f"{where}: seed {n} has no section in docs/studies.md"
                for n in re.findall(r"0\d\d", group)
                if n not in sections
            ]
        for doc in re.findall(r"\bdocs/([\w./-]+\.(?:md|png))", text):
            if not (ROOT / "docs" / doc).is_file():
                bad.append(f"{where}: docs/{doc} does not exist")
    for f in docs_pages():  # relative Markdown links resolve
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", f.read_text()):
            if not re.match(r"\w+://", link) and not (f.parent / link).exists():
                bad.append(f"{f.relative_to(ROOT)}: link {link} does not resolve")
        for link, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", f.read_text()):  # and so do their #anchors
            page = f.parent / link if link else f
            if page.suffix == ".md" and page.is_file() and anchor not in _anchors(page):
                bad.append(f"{f.relative_to(ROOT)}: link {link}#{anchor}: no such heading in {page.name}")
    assert not bad, "\n".join(bad)


def _anchors(page: Path) -> set[str]:
    """The #anchors of a page's headings, as GitHub makes them: lower case, punctuation dropped, spaces to '-', a
    repeated heading's -1, -2, ..."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    out: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        n = 0
        while (f"{slug}-{n}" if n else slug) in out:
            n += 1
        out.add(f"{slug}-{n}" if n else slug)
    return out


# a path of the repository written in a document: `src/sweep/job.py`, `docs/results/`, `examples/solvers/x.py:solve`
# (placeholders such as `sweeps/<name>.yaml` are not paths)
FILE_PATH = re.compile(r"(?<![\w/.])((?:src|docs|conf|sweeps|tests|benchmarks|launchers|examples)/[\w./-]*\w\.\w+)")
REPO_PATH = re.compile(r"`((?:src|docs|conf|sweeps|tests|benchmarks|launchers|examples|\.ci)/[^`\s<>*{}]*)`")
# the package's files named from inside src/ (`sweep/trackers/stack.py` named a file that is src/sweep/trace/stack.py)
PACKAGE_PATH = re.compile(r"`(sweep/[^`\s<>*{}]*)`")


def docs_pages() -> list[Path]:
    """The README and every page under docs/ (docs/results/ too)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_path_the_docs_name_exists():
    """A document that names a file or folder of the repository names one that is there (moved text kept its
    pointers to files that had gone: `src/sweep/cost.py`, `sql_run_writer.py`)."""
    missing = [
        f"{f.relative_to(ROOT)}: {path}"
        for f in docs_pages()
        for path in REPO_PATH.findall(f.read_text())
        if "..." not in path and not (ROOT / path.split(":")[0].rstrip("/")).exists()
    ]
    missing += [
        f"{f.relative_to(ROOT)}: {path}"
        for f in docs_pages()
        for path in PACKAGE_PATH.findall(f.read_text())
        if not (ROOT / "src" / path.split(":")[0].rstrip("/")).exists()
    ]
    # a file named in a config's or the package's comments (`read by src/sweep/config/prices.py`)
    configs = [*(ROOT / "conf").rglob("*.yaml"), *(ROOT / "sweeps").rglob("*.yaml"), ROOT / "pyproject.toml"]
    missing += [
        f"{f.relative_to(ROOT)}: {path}"
        for f in configs
        for path in FILE_PATH.findall(f.read_text())
        if not (ROOT / path).exists()
    ]
    assert not missing, "named but not in the repository:\n" + "\n".join(missing)


def test_the_readme_is_a_map():
    """A page a newcomer reads in ten minutes: what it is, the two commands, the main uses, the concepts, the code,
    links to docs/; measurements and internals live in docs/."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for heading in ("## Two commands", "## The main uses", "## Where things land", "## The code", "## The docs"):
        assert heading in readme, heading
    for page in (ROOT / "docs").glob("*.md"):  # every concept page is on the map
        assert f"docs/{page.name}" in readme or f"]({page.name})" in readme, page.name


def test_the_readme_names_the_debian_packages_ci_installs():
    """`bash .ci/setup && .venv/bin/python -m pytest` is "what CI runs" once `.ci/run` has installed Debian's
    packages: the README named three of the five (bubblewrap and valgrind missing)."""
    readme = (ROOT / "README.md").read_text()
    said = readme.split("## The tests", 1)[1].split("`.ci/run` installs Debian's", 1)[1].split(")", 1)[0]
    installed = re.findall(r"apt-get install -y -qq ([\w\- ]+?) >", (ROOT / ".ci" / "run").read_text())
    assert sorted(re.findall(r"`([\w-]+)`", said)) == sorted(p for line in installed for p in line.split())


def _code_map(readme: str) -> str:
    return readme.split("## The code", 1)[1].split("```", 2)[1]


def test_the_readme_names_every_preset_command_and_package():
    """A newcomer finds every preset (`sweeps/<name>.yaml`), every console script and every folder of the package
    on the map; a new one added without a line there fails here."""
    readme = (ROOT / "README.md").read_text()
    presets = sorted(p.stem for p in (ROOT / "sweeps").glob("*.yaml"))
    assert [n for n in presets if f"`{n}`" not in readme] == []
    section = (ROOT / "pyproject.toml").read_text().split("[project.scripts]\n", 1)[1].split("\n[", 1)[0]
    scripts = re.findall(r"^([\w-]+) = ", section, re.M)  # (tomllib: Python 3.11 on)
    assert "sweep-ui" in scripts
    said = readme.split("Every command below is also a console script in `.venv/bin`", 1)[1].split(";", 1)[0]
    assert sorted(re.findall(r"`([\w-]+)`", said)) == sorted(scripts)
    code = _code_map(readme)
    folders = [d.name for d in (ROOT / "src" / "sweep").iterdir() if d.is_dir() and d.name != "__pycache__"]
    assert [f for f in folders if not re.search(rf"(?<![\w/]){f}/", code)] == []
    # each module among the names a line of the map begins with, before its description (three spaces on): the
    # registry was named only inside report/'s description, "(the metric registry: metrics.py)", no report/metrics.py
    named = {n for line in code.splitlines() for n in line.strip().split("   ")[0].split()}
    modules = [f.name for f in (ROOT / "src" / "sweep").glob("*.py") if f.stem != "__init__"]
    assert [m for m in modules if m not in named] == []


def test_every_option_is_in_its_docs_table():
    """Every setting of the project's launcher (`hydra.launcher.*`) is a row of docs/launchers.md's options table,
    and every key of a job beside its groups (`mlflow.*`, `run_name`, `batch`, `time_limit_s`, ...) a row of
    docs/configuration.md's: `time_limit_s` and `preload` were in neither."""
    from dataclasses import fields

    from hydra_plugins.sweep_launcher.config import ModalConf, SweepLauncherConf
    from sweep.config.schema import Config, MLflowConfig

    def rows(page: str, heading: str) -> set[str]:
        text = (ROOT / "docs" / page).read_text().split(heading, 1)[1]
        table = [ln for ln in text.split("\n\n", 2)[1].splitlines() if ln.startswith("| `")]
        return {name for ln in table for name in re.findall(r"`([\w.<>*]+)`", ln.split(" | ")[0])}

    launcher = rows("launchers.md", "## Options")
    wanted = {f.name for f in fields(SweepLauncherConf) if f.name not in ("_target_", "modal")}
    wanted |= {f"modal.{f.name}" for f in fields(ModalConf)}
    assert sorted(wanted - launcher) == []
    keys = rows("configuration.md", "Beside the groups, every job has these keys")
    groups = {"problem", "method", "variant", "device", "tracker"}
    wanted = {f.name for f in fields(Config) if f.name not in groups | {"mlflow", "extra", "compare", "challenge"}}
    wanted |= {f"mlflow.{f.name}" for f in fields(MLflowConfig)} | {"extra.<key>", "compare.*", "challenge.*"}
    assert sorted(wanted - keys) == []


def test_every_key_of_every_option_is_documented():
    """docs/configuration.md's groups table names each option's keys, or links the page that does (the character
    models: chars.md; the solver: challenge.md; the energy tracker: energy.md): smt's pair_block and the gradient
    methods' target_accuracy were on no page."""
    from dataclasses import fields

    from sweep.config.schema import SCHEMAS

    doc = (ROOT / "docs" / "configuration.md").read_text()
    table = doc.split("## The groups", 1)[1].split("\n\n", 2)[1]
    cells = {ln.split(" | ")[0].strip("| "): ln.split(" | ")[2] for ln in table.splitlines()[2:]}
    missing = []
    for group, options in SCHEMAS.items():
        for option, schema in options.items():
            pages = [cells[group]] + [
                (ROOT / "docs" / m).read_text() for m in re.findall(r"\]\((\w+\.md)\)", cells[group])
            ]
            own = [p for p in pages[1:] if re.search(rf"\b{option}\b", p)]  # the linked pages that name the option
            for f in fields(schema):
                if f.name not in ("_target_", "name") and not any(
                    re.search(rf"\b{f.name}\b", p) for p in [pages[0], *own]
                ):
                    missing.append(f"{group}={option}: {f.name}")
    assert missing == []


def test_the_docs_commands_run_pasted_without_an_activated_venv(tmp_path):
    """`python -m sweep ...` pasted from a page failed without an activated venv ("No module named sweep"): every
    command is written as the README writes it, `.venv/bin/<script>` or `.venv/bin/python`, and each script it
    names is one the project installs; one runs pasted, from the root, with a PATH that has no venv."""
    import os
    import subprocess

    section = (ROOT / "pyproject.toml").read_text().split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    scripts = set(re.findall(r"(?m)^([\w-]+) = ", section)) | {"python", "modal"}
    bare = re.compile(r"(?<![\w/.-])python3? (?:-m (?:sweep|pytest)|benchmarks/)")
    bad, named = [], set()
    for f in docs_pages():
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if bare.search(line):
                bad.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
            named |= set(re.findall(r"\.venv/bin/([\w-]+)", line))
    assert not bad, "commands that need an activated venv:\n" + "\n".join(bad)
    assert named and named <= scripts, named - scripts
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if ".venv" not in p)
    done = subprocess.run(
        ["bash", "-c", f"cd {ROOT} && .venv/bin/sweep-compare --help"], env={**os.environ, "PATH": path},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


def test_no_docs_command_gives_hydra_a_tilde_the_shell_leaves():
    """docs/chars.md's `problem.path=~/data/...` failed pasted: bash expands no ~ after `a.b=` (not a variable's
    name), and Hydra's lexer cannot read it; a page writes $HOME/... or quotes the value."""
    tilde = re.compile(r"(?:^|\s)[\w./+-]+\.[\w.]+=~")
    bad = [
        f"{f.relative_to(ROOT)}:{n}: {line.strip()}"
        for f in docs_pages()
        for n, line in enumerate(f.read_text().splitlines(), 1)
        if ".venv/bin/" in line and tilde.search(line)
    ]
    assert not bad, "\n".join(bad)


def test_a_presets_job_count_in_the_docs_is_its_grid():
    """docs/energy.md said `sweeps=energy_proxies  # 102 jobs: 17 arms` after the preset had gained its four
    character-model arms (126 jobs): a count written beside a preset's command is the product of its sweep's
    values (a line that overrides anything else is left alone)."""
    import yaml

    def values(v: object) -> int:
        s = str(v)
        if m := re.fullmatch(r"range\((\d+)\)", s):
            return int(m.group(1))
        return len(s.split(","))

    said = re.compile(r"\.venv/bin/(?:sweep|python -m sweep) sweeps=(\w+)\s+# ([\d,]+) (?:jobs|runs)\b")
    seen, bad = 0, []
    for f in docs_pages():
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if not (m := said.search(line)):
                continue
            params = yaml.safe_load((ROOT / "sweeps" / f"{m.group(1)}.yaml").read_text())["hydra"]["sweeper"]["params"]
            grid = math.prod(values(v) for v in params.values())
            seen += 1
            if grid != int(m.group(2).replace(",", "")):
                bad.append(f"{f.relative_to(ROOT)}:{n}: says {m.group(2)}, the grid is {grid}: {line.strip()}")
    assert seen >= 2 and not bad, "\n".join(bad)


def test_every_option_of_every_console_script_says_what_it_does(capsys):
    """`sweep-ui --help` listed `--port PORT` and `sweep-compare --help` `--no-plot` with no word of what they do
    (the port's default, 5000, nowhere): every option of every script but Hydra's `sweep` has a help text."""
    import importlib

    section = (ROOT / "pyproject.toml").read_text().split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    silent = []
    for script, target in re.findall(r'(?m)^([\w-]+) = "([\w.:]+)"', section):
        if script == "sweep":
            continue
        module, _, func = target.partition(":")
        with pytest.raises(SystemExit):
            getattr(importlib.import_module(module), func)(["--help"])
        lines = capsys.readouterr().out.split("options:", 1)[1].splitlines()
        for i, line in enumerate(lines):
            option = re.match(r"^  (-[^ ]+(?: [A-Z_]+)?(?:, -[^ ]+(?: [A-Z_]+)?)*)(\s{2,}\S.*)?$", line)
            helped = option and (option.group(2) or re.match(r"^ {20,}\S", "".join(lines[i + 1 : i + 2])))
            if option and not helped:
                silent.append(f"{script} {option.group(1)}")
    assert not silent, silent


def test_every_benchmark_command_the_docs_show_names_a_script_and_flags_it_takes():
    """A measurement's command must run pasted: the script is there and each `--flag` the page gives it is one that
    the script (or the module whose main it runs, `sweep.proxy_study.slice`) declares."""
    command = re.compile(r"benchmarks/([a-z_]+\.py)((?: --?[a-z-]+(?: [^ `\\]+)?)*)")
    sources = {p: p.read_text() for p in (ROOT / "src").rglob("*.py")}
    bad = []
    for f in docs_pages():
        for script, args in command.findall(f.read_text()):
            path = ROOT / "benchmarks" / script
            if not path.is_file():
                bad.append(f"{f.relative_to(ROOT)}: benchmarks/{script} is not there")
                continue
            text = path.read_text()
            for flag in re.findall(r"(?<!\S)(--[a-z][a-z-]*)", args):
                if f'"{flag}"' not in text and not any(f'"{flag}"' in s for s in sources.values()):
                    bad.append(f"{f.relative_to(ROOT)}: benchmarks/{script} takes no {flag}")
    assert not bad, "\n".join(bad)
