"""No module of `ci_evals/` uses another module's private (`_name`) names.

A leading underscore says "only this module relies on it": a name another
module imports (`from ci_evals.x import _y`) or reaches through a module
(`x._y`) is part of two modules' contract while reading as neither's. Such a
name is made public where it lives, or moved to a module both can import.
Fast: files only (ast), no import.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

PACKAGE = REPO / "ci_evals"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an `ImportFrom` reads, relative levels resolved."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def violations(root: Path) -> list[str]:
    """`file:line: what` for each private name one module takes from another under `root`."""
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    found: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(root.parent).as_posix()
        # Local names bound to another of our modules: `import a.b as m`, `from a import b`.
        module_aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        local = alias.asname or alias.name.split(".")[0]
                        module_aliases[local] = alias.name if alias.asname else local
            elif isinstance(node, ast.ImportFrom):
                source = imported_from(node, module, path.name == "__init__.py")
                if source not in modules or source == module:
                    continue
                for alias in node.names:
                    if is_private(alias.name):
                        found.append((where, node.lineno, f"from {source} import {alias.name}"))
                    elif f"{source}.{alias.name}" in modules:
                        module_aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not is_private(node.attr):
                continue
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in module_aliases:
                target = ".".join([module_aliases[value.id], *reversed(chain)])
                if target in modules and target != module:
                    found.append((where, node.lineno, f"{target}.{node.attr}"))
    return [f"{where}:{line}: {what}" for where, line, what in sorted(found)]


def test_no_module_uses_another_modules_private_names() -> None:
    found = violations(PACKAGE)
    assert not found, (
        "a module uses another module's private name: make it public where it is "
        "defined (or move it to a module both import):\n" + "\n".join(found)
    )


def test_the_scan_finds_each_way_of_reaching_a_private_name(tmp_path: Path) -> None:
    # The check above passes on a clean tree; this proves it would see each form.
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "_secret = 1\npublic = 2\n\n\ndef _helper():\n    return _secret\n"
    )
    (package / "sub" / "b.py").write_text(
        "from pkg.a import _secret, public\n"
        "from .. import a\n"
        "from ..a import _helper\n"
        "import pkg.a as mod\n"
        "import pkg.a\n"
        "x = a._helper() + mod._secret + pkg.a._secret + public\n"
    )
    assert violations(package) == [
        "pkg/sub/b.py:1: from pkg.a import _secret",
        "pkg/sub/b.py:3: from pkg.a import _helper",
        "pkg/sub/b.py:6: pkg.a._helper",  # a._helper()
        "pkg/sub/b.py:6: pkg.a._secret",  # mod._secret
        "pkg/sub/b.py:6: pkg.a._secret",  # pkg.a._secret
    ]
