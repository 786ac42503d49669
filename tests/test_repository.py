"""The repository explains itself: no developer's machine paths, and every document it cites is in it
(docs/, the studies it names as "seed 00N" in docs/studies.md)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

SHIPPED = ("src", "launchers", "benchmarks", "conf", "sweeps", "docs", "README.md", "pyproject.toml", ".ci")
CODE = SHIPPED + ("tests",)
TEXT = {".py", ".yaml", ".yml", ".md", ".toml", ".txt", ".cfg", ".sh", ""}  # "": .ci/run, .ci/setup
# a temporary, home or checkout directory (`/tmp`, `/home/me/...`, macOS's `/private/var/...`, `C:\Users\...`)
MACHINE_PATH = re.compile(
    r"(?<![\w.~-])/(?:tmp|home|work|root|Users|mnt|scratch|private/var|var/folders)\b"
    r"|\b[A-Z]:\\+Users\b"
)
SEED_REF = re.compile(r"\bseeds? (0\d\d(?:\s*(?:/|,|and|-|–|…)\s*0\d\d)*)", re.I)


def _files(tops: tuple[str, ...]) -> list[Path]:
    out = []
    for top in tops:
        p = ROOT / top
        paths = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
        out += [f for f in paths if f.suffix in TEXT and "__pycache__" not in f.parts and f.name != Path(__file__).name]
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
    assert not bad, "\n".join(bad)


# a path of the repository written in a document: `src/sweep/job.py`, `docs/results/`, `examples/solvers/x.py:solve`
# (placeholders such as `sweeps/<name>.yaml` are not paths)
FILE_PATH = re.compile(r"(?<![\w/.])((?:src|docs|conf|sweeps|tests|benchmarks|launchers|examples)/[\w./-]*\w\.\w+)")
REPO_PATH = re.compile(r"`((?:src|docs|conf|sweeps|tests|benchmarks|launchers|examples|\.ci)/[^`\s<>*{}]*)`")


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
