"""No import cycle between the parts of any package of `ci_evals`, at any depth.

A package is one layer only when its children (modules and sub-packages) import
each other one way: seen whole, `a` imports `b` when any module in `a` imports
any module in `b`. The import-linter `acyclic_siblings` contract checks this to
a fixed depth; this test checks every package, so a package that straddles
another (as `grading` once sat on both sides of `suite`) fails with the cycle
and one import per step of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import pairwise

import grimp

Edges = Mapping[str, Mapping[str, str]]  # part -> part it imports -> one such import


def part_edges(graph: grimp.ImportGraph, package: str) -> dict[str, dict[str, str]]:
    """Which child of `package` imports which other child (through any module below
    them), each with one import that shows it."""
    children = graph.find_children(package)

    def child_of(module: str) -> str | None:
        for child in children:
            if module == child or module.startswith(child + "."):
                return child
        return None

    edges: dict[str, dict[str, str]] = {}
    for module in sorted(graph.modules):
        source = child_of(module)
        if source is None:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            target = child_of(imported)
            if target is not None and target != source:
                edges.setdefault(source, {}).setdefault(target, f"{module} -> {imported}")
    return edges


def find_cycle(edges: Edges) -> list[str] | None:
    """One cycle among `edges` as its parts in order (first == last), or None."""
    done: set[str] = set()

    def visit(part: str, path: list[str]) -> list[str] | None:
        if part in path:
            return [*path[path.index(part) :], part]
        if part in done:
            return None
        for target in sorted(edges.get(part, {})):
            if cycle := visit(target, [*path, part]):
                return cycle
        done.add(part)
        return None

    for start in sorted(edges):
        if cycle := visit(start, []):
            return cycle
    return None


def package_cycles(graph: grimp.ImportGraph) -> Iterator[str]:
    """Every package with a cycle among its parts, one line per step of it."""
    for package in sorted(graph.modules):
        edges = part_edges(graph, package)
        cycle = find_cycle(edges)
        if cycle is not None:
            steps = [f"  {edges[a][b]}" for a, b in pairwise(cycle)]
            yield "\n".join([f"{package}: {' -> '.join(cycle)}", *steps])


def test_no_package_of_ci_evals_has_an_import_cycle() -> None:
    graph = grimp.build_graph("ci_evals", cache_dir=None)
    assert len(part_edges(graph, "ci_evals")) > 10, "the graph holds ci_evals' packages"
    found = list(package_cycles(graph))
    assert not found, "import cycles between the parts of a package:\n" + "\n".join(found)


def test_a_package_cycle_is_reported_with_its_imports() -> None:
    """The check above finds a cycle through sub-modules, at any depth."""
    graph = grimp.ImportGraph()
    for module in ("app", "app.a", "app.a.x", "app.b", "app.b.y", "app.b.y.z", "app.c"):
        graph.add_module(module)
    graph.add_import(importer="app.a.x", imported="app.b.y.z")
    graph.add_import(importer="app.b.y", imported="app.c")
    graph.add_import(importer="app.b.y.z", imported="app.a")
    assert list(package_cycles(graph)) == [
        "app: app.a -> app.b -> app.a\n  app.a.x -> app.b.y.z\n  app.b.y.z -> app.a"
    ]
