"""A plain clone stands alone: nothing in it points at a directory beside the checkout.

``.ci/run``, the tests, the docs, the examples, the benchmarks and the scripts must work (and
read) with nothing next to the repository; CHANGELOG.md may name old paths as history.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

THIS = Path(__file__).resolve()  # spells the patterns out, so it is not scanned
_SIBLING = re.compile(r"\.\./shared|(?<![\w.])shared/(?:realmodel|bench|DESIGN)")
_WORKDIR = re.compile("/" + "work/")  # spelled in two: this file names no real path
SKIP_PARTS = {"node_modules", ".venv", ".peers-venv", "__pycache__", "results", ".ruff_cache"}
TEXT_SUFFIXES = {".py", ".md", ".sh", ".jinja", ".toml", ".json", ".mjs", ".txt", ".cfg", ""}


def _texts() -> list[Path]:
    files = [REPO / "README.md", REPO / "pyproject.toml"]
    for top in ("docs", "tests", "examples", "benchmarks", "scripts", ".ci"):
        for path in sorted((REPO / top).rglob("*")):
            rel = path.relative_to(REPO).parts
            if path == THIS or not path.is_file() or SKIP_PARTS & set(rel):
                continue
            if path.suffix in TEXT_SUFFIXES:
                files.append(path)
    return files


def test_nothing_points_at_a_sibling_of_the_checkout() -> None:
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in _texts()
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if _SIBLING.search(line) or _WORKDIR.search(line)
    ]
    assert found == []


def test_the_check_sees_what_it_guards() -> None:
    # The patterns catch the forms a sibling reference takes, and the walk reaches each part.
    assert _SIBLING.search("bash .." + "/shared/realmodel/serve.sh")
    assert _SIBLING.search("see .." + "/shared/DESIGN.md")
    assert _SIBLING.search("cd shared" + "/bench")
    assert _WORKDIR.search("/" + "work/main/.venv")
    assert not _SIBLING.search("a shared/ folder of its own")  # only the sibling's parts
    parts = {p.relative_to(REPO).parts[0] for p in _texts()}
    assert {"docs", "tests", "examples", "benchmarks", "scripts", ".ci", "README.md"} <= parts
