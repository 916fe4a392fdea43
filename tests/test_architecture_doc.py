"""docs/ARCHITECTURE.md describes the code as it is.

Every module under `ci_evals/` has exactly one module line (`- \\`ci_evals/x.py\\` — what
it is for.`), every path the page names exists, the layers picture is the import-linter
layers contract of pyproject.toml, and its links resolve. Fast: files only, no subprocess.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections import Counter
from pathlib import Path

import tomllib

from tests.paths import REPO

DOC = REPO / "docs" / "ARCHITECTURE.md"
PACKAGE = REPO / "ci_evals"
# A module line: a list item that starts with the module's path in backticks.
MODULE_LINE = re.compile(r"^- `(ci_evals/[^`]*?\.py)`(?: — (.*))?$", re.M)
# Any path into the package the page names, in backticks (a module or a folder).
PACKAGE_PATH = re.compile(r"`(ci_evals/[\w./-]*)`")
SENTENCE_MAX = 200


def text() -> str:
    return DOC.read_text(encoding="utf-8")


def holds_code(path: Path) -> bool:
    """Whether a module has anything besides its docstring."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return bool(body)


def in_a_package(path: Path) -> bool:
    """False for a .py file in a data folder (a folder of the package with no `__init__.py`)."""
    folder = path.parent
    while folder != PACKAGE:
        if not (folder / "__init__.py").is_file():
            return False
        folder = folder.parent
    return True


def modules() -> set[str]:
    """The modules that need a line: every `ci_evals/**/*.py`, less `__pycache__`, data
    folders and `__init__.py` files that hold only a docstring."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if "__pycache__" in path.parts or not in_a_package(path):
            continue
        if path.name == "__init__.py" and not holds_code(path):
            continue
        found.add(path.relative_to(REPO).as_posix())
    return found


def module_lines() -> list[tuple[str, str]]:
    return [(m[1], m[2] or "") for m in MODULE_LINE.finditer(text())]


def test_every_module_has_a_line() -> None:
    named = {path for path, _ in module_lines()}
    missing = sorted(modules() - named)
    assert not missing, (
        "docs/ARCHITECTURE.md has no module line for "
        + ", ".join(missing)
        + "; add one under its package, in layer order: "
        + "; ".join(f"- `{path}` — what it is for." for path in missing)
    )


def test_every_module_line_names_a_module() -> None:
    stale = sorted({path for path, _ in module_lines()} - modules())
    assert not stale, (
        "docs/ARCHITECTURE.md has a module line for "
        + ", ".join(stale)
        + ": remove it (no such module, or an `__init__.py` with only a docstring)"
    )


def test_no_module_is_named_twice() -> None:
    twice = sorted(path for path, n in Counter(p for p, _ in module_lines()).items() if n > 1)
    assert not twice, f"docs/ARCHITECTURE.md: keep one module line each for {', '.join(twice)}"


def test_a_module_line_is_one_short_sentence() -> None:
    bad = [
        f"{path} ({len(sentence)} characters)"
        for path, sentence in module_lines()
        if not sentence or len(sentence) > SENTENCE_MAX
    ]
    assert not bad, (
        f"docs/ARCHITECTURE.md: a module line is `- `PATH` — one sentence` of at most "
        f"{SENTENCE_MAX} characters (details go to the module's docstring or a topic doc): "
        + "; ".join(bad)
    )


def test_every_package_path_named_exists() -> None:
    gone = sorted({p for p in PACKAGE_PATH.findall(text()) if not (REPO / p).exists()})
    assert not gone, f"docs/ARCHITECTURE.md names paths that do not exist: {', '.join(gone)}"


def normalised(layer: str) -> str:
    """A layer as `a | b` / `a : b`, without the `ci_evals.` prefix."""
    layer = re.sub(r"\bci_evals\.", "", layer)
    return re.sub(r"\s*([|:])\s*", r" \1 ", layer).strip()


def contract_layers() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layered = [c for c in contracts if c["type"] == "layers"]
    assert len(layered) == 1, "pyproject.toml: expected one import-linter layers contract"
    return [normalised(layer) for layer in layered[0]["layers"]]


def picture_layers() -> list[str]:
    """The first code block after `## Layers`: a layer per line, then its description."""
    section = text().split("\n## Layers\n", 1)[1]
    block = section.split("```", 2)[1]
    lines = [line for line in block.splitlines()[1:] if line.strip()]
    return [normalised(re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]) for line in lines]


def test_the_layers_picture_is_the_contract() -> None:
    picture, contract = picture_layers(), contract_layers()
    diff = "\n".join(
        difflib.unified_diff(picture, contract, "picture", "pyproject.toml", lineterm="")
    )
    assert picture == contract, (
        "docs/ARCHITECTURE.md's layers picture differs from the import-linter layers "
        f"contract in pyproject.toml (make the picture match):\n{diff}"
    )


def test_its_links_resolve() -> None:
    targets = re.findall(r"\]\(([^)\s]+)\)", text())
    broken = sorted(
        {
            t
            for t in targets
            if not re.match(r"[a-z]+:", t) and not (DOC.parent / t.split("#")[0]).exists()
        }
    )
    assert not broken, f"docs/ARCHITECTURE.md links to files that do not exist: {', '.join(broken)}"
