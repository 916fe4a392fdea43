"""One name per concept: no class name is defined twice in `ci_evals/`.

Two classes of one name (three `Usage`s, two `Launcher`s) make a reader ask which
one a line means, and invite `import X as Y` to dodge the clash; a name that says
what the class holds (`TokenUsage`, `PricedUsage`, `StubUsage`) answers it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ci_evals"


def class_names(root: Path) -> dict[str, list[str]]:
    """Each class name defined under `root` (nested classes too) -> the files defining it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(rel)
    return found


def twice(root: Path, allowed: set[tuple[str, str]]) -> dict[str, list[str]]:
    """The names defined more than once, each with its files, leaving out `allowed` pairs."""
    clashes = {}
    for name, files in class_names(root).items():
        counted = [f for f in files if (name, f) not in allowed]
        if len(files) > 1 and counted:
            clashes[name] = files
    return clashes


def test_no_class_name_is_defined_twice() -> None:
    assert twice(PACKAGE, set()) == {}


def test_a_second_definition_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class Usage:\n    pass\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "c.py").write_text("def f():\n    class Usage:\n        pass\n")
    (tmp_path / "d.py").write_text("class Only:\n    pass\n")
    assert twice(tmp_path, set()) == {"Usage": ["a.py", "b/c.py"]}
    # The allowance is per file: one allowed definition does not excuse the other.
    assert twice(tmp_path, {("Usage", "a.py")}) == {"Usage": ["a.py", "b/c.py"]}
    assert twice(tmp_path, {("Usage", "a.py"), ("Usage", "b/c.py")}) == {}
