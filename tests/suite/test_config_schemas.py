"""The JSON Schemas the package ships for `ci-evals.yaml` and `stage_map.yaml`
(ci_evals/schemas/, docs/json.md) say what the loaders accept:

- every key at every level the schema describes is the loader's own list of
  known keys, compared with the loader's constants (a key added to a loader and
  not to the schema, or the other way round, fails here);
- every valid file of the repository, of the test helpers and of `init`'s
  drafts validates;
- a key the loader refuses, at each level, the schema refuses too;
- `init` heads its drafts with the modeline naming the schema when the
  install lies inside the repository, and with nothing otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import ci_evals
from ci_evals.agents.loop import config as loop_config
from ci_evals.errors import UserError
from ci_evals.grading.config import CHECKLIST_RULES, POLICY_KEYS
from ci_evals.grading.kinds import command, mcp
from ci_evals.grading.kinds.checks.base import ID
from ci_evals.grading.kinds.checks.registry import CHECK_KINDS
from ci_evals.grading.kinds.registry import KINDS as GRADER_KINDS
from ci_evals.grading.reviewer.config import REVIEWER_KEYS
from ci_evals.sandbox.docker import kind as docker_kind
from ci_evals.selection import stage_map as stage_map_loader
from ci_evals.selection.stage_map import load_stage_map
from ci_evals.suite import contracts, load, plugin_evals
from ci_evals.suite.load import load_suite
from tests.conftest import PROJECT, copy_example, git
from tests.onboarding_helpers import cli, copy_feature_dev
from tests.run_helpers import make_suite

SCHEMAS = Path(ci_evals.__file__).parent / "schemas"
SUITE_SCHEMA = json.loads((SCHEMAS / "ci-evals.schema.json").read_text())
MAP_SCHEMA = json.loads((SCHEMAS / "stage_map.schema.json").read_text())


def errors(document: Any, schema: dict[str, Any]) -> list[str]:
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]


def keys(schema: dict[str, Any], *path: str) -> set[str]:
    """The property names of the object at `path` (`items` steps into arrays, a
    name into properties; an anyOf/oneOf: its object branch)."""
    node = schema
    for step in path:
        if step == "items":
            node = node["items"]
        elif step.startswith("oneOf:") or step.startswith("anyOf:"):
            kind, index = step.split(":")
            node = node[kind][int(index)]
        else:
            node = node["properties"][step]
    assert node.get("additionalProperties") is False, f"{path} admits any key"
    return set(node["properties"])


def then_keys(schema: dict[str, Any], path: tuple[str, ...], kind: str) -> set[str]:
    """The keys the `if kind: KIND then ...` branch of an agent or sandbox allows."""
    node = schema["properties"]
    for step in path:
        node = node[step]
    (mapping,) = [branch for branch in node["anyOf"] if branch.get("type") == "object"]
    for rule in mapping["allOf"]:
        condition = rule["if"]["properties"]["kind"]
        if condition.get("const") == kind or kind in condition.get("enum", ()):
            result: set[str] = set(rule["then"]["properties"])
            assert rule["then"]["additionalProperties"] is False
            return result
    raise AssertionError(f"no branch for kind {kind}")


# ------------------------------------------------------------ the keys, level by level


def test_suite_schema_keys_are_the_loaders() -> None:
    assert keys(SUITE_SCHEMA) == set(load._SUITE_KEYS)
    assert keys(SUITE_SCHEMA, "stages", "items") == set(load._STAGE_KEYS)
    assert set(load._STAGE_KEYS) >= set(GRADER_KINDS.builtin)  # every built-in grader key
    assert keys(SUITE_SCHEMA, "limits") == set(load.LIMIT_KEYS)
    assert keys(SUITE_SCHEMA, "stages", "items", "limits") == set(load.LIMIT_KEYS)
    assert keys(SUITE_SCHEMA, "scenarios", "items") == set(load.SCENARIO_KEYS)
    assert keys(SUITE_SCHEMA, "scoring") == set(POLICY_KEYS)
    assert keys(SUITE_SCHEMA, "stages", "items", "scoring") == set(POLICY_KEYS)
    checklist = SUITE_SCHEMA["properties"]["scoring"]["properties"]["checklist"]
    assert checklist == {"enum": list(CHECKLIST_RULES)}
    assert keys(SUITE_SCHEMA, "stages", "items", "reviewer") == set(REVIEWER_KEYS)
    assert keys(SUITE_SCHEMA, "stages", "items", "graders", "items") == set(command.GRADER_KEYS)
    assert keys(SUITE_SCHEMA, "stages", "items", "mcp", "items") == set(mcp.GRADER_KEYS)
    assert keys(SUITE_SCHEMA, "stages", "items", "produces", "items") == set(
        contracts.PRODUCES_KEYS
    )
    assert keys(SUITE_SCHEMA, "stages", "items", "consumes", "items") == set(
        contracts.CONSUMES_KEYS
    )
    assert keys(SUITE_SCHEMA, "plugin_evals", "anyOf:1") == set(plugin_evals._SUITE_KEYS)
    assert keys(SUITE_SCHEMA, "plugin", "anyOf:1") == {"marketplace", "name"}
    assert then_keys(SUITE_SCHEMA, ("agent",), "loop") == {"kind", *loop_config._KEYS}
    assert then_keys(SUITE_SCHEMA, ("agent",), "claude") == {"kind"}
    assert then_keys(SUITE_SCHEMA, ("sandbox",), "docker") == set(docker_kind.KEYS)
    assert then_keys(SUITE_SCHEMA, ("sandbox",), "bwrap") == {"kind"}
    assert then_keys(SUITE_SCHEMA, ("sandbox",), "local") == {"kind"}


def test_check_kinds_are_the_loaders() -> None:
    """A check's branch is what its kind declares (`CheckKind.keys`), in the registry's order."""
    branches = SUITE_SCHEMA["properties"]["stages"]["items"]["properties"]["checks"]["items"]
    declared = [
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {ID: {"type": "string"}, **CHECK_KINDS.get(name).keys},
            "required": [name],
        }
        for name in CHECK_KINDS.builtin
    ]
    assert branches["oneOf"] == declared, (
        "the `checks` items of ci_evals/schemas/ci-evals.schema.json, from the kinds' keys: "
        + json.dumps({"oneOf": declared}, indent=2)
    )


def test_stage_map_schema_keys_are_the_loaders() -> None:
    assert keys(MAP_SCHEMA) == set(stage_map_loader._TOP_KEYS)
    assert keys(MAP_SCHEMA, "entries", "items") == set(stage_map_loader._ENTRY_KEYS)
    assert keys(MAP_SCHEMA, "marketplace") == {"file", "plugin"}


# ------------------------------------------------------------ valid files validate


class _EditorLoader(yaml.SafeLoader):
    """YAML as an editor's language server reads it (1.2): `2025-11-25` is a string,
    not a date (the loader reads it as text too)."""


_EditorLoader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_yaml(path: Path) -> Any:
    return parse(path.read_text(encoding="utf-8"))


def parse(text: str) -> Any:
    return yaml.load(text, Loader=_EditorLoader)  # a SafeLoader: no tags run code


def repository_files(name: str) -> Iterator[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=PROJECT, capture_output=True, text=True, check=False
    )
    if listed.returncode == 0:  # an sdist has no .git: walk it instead
        paths = [PROJECT / p for p in listed.stdout.split("\0") if p]
    else:
        paths = list(PROJECT.rglob(name))
    return (p for p in paths if p.name == name and ".ci-evals" not in p.parts)


def test_every_suite_and_map_of_the_repository_validates() -> None:
    suites = list(repository_files("ci-evals.yaml"))
    maps = list(repository_files("stage_map.yaml"))
    assert PROJECT / "ci-evals.yaml" in suites and PROJECT / "stage_map.yaml" in maps
    for path in suites:
        load_suite(path)  # the loader takes it: then the schema must too
        assert errors(read_yaml(path), SUITE_SCHEMA) == [], path
    for path in maps:
        load_stage_map(path)
        assert errors(read_yaml(path), MAP_SCHEMA) == [], path


def test_the_test_helpers_suite_validates(tmp_path: Path) -> None:
    suite, _ = make_suite(tmp_path, scenarios=("acme", "globex"), budget_usd=2.0)
    load_suite(suite)
    assert errors(read_yaml(suite), SUITE_SCHEMA) == []


@pytest.mark.slow
def test_inits_drafts_validate_and_name_their_schema(tmp_path: Path) -> None:
    """Phases (feature-dev) drafted with ci-evals installed inside the repository
    (here: the package copied into it, first on PYTHONPATH): the modeline names the
    schema relative to the suite's folder; installed elsewhere, no modeline."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    copy_feature_dev(repo, "plugin")
    shutil.copytree(
        SCHEMAS.parent, repo / "vendor" / "ci_evals", ignore=shutil.ignore_patterns("__pycache__")
    )
    git(repo, "add", "plugin")
    git(repo, "commit", "-q", "-m", "the plugin")
    env = {**os.environ, "PYTHONPATH": str(repo / "vendor")}
    env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC_")}
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", "init", "plugin", "--stages", "explore,implement"],
        cwd=repo, capture_output=True, text=True, check=False, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name, schema in (("ci-evals.yaml", SUITE_SCHEMA), ("stage_map.yaml", MAP_SCHEMA)):
        text = (repo / name).read_text()
        first = text.splitlines()[0]
        stem = "ci-evals" if name == "ci-evals.yaml" else "stage_map"
        assert (
            first == f"# yaml-language-server: $schema=vendor/ci_evals/schemas/{stem}.schema.json"
        )
        target = repo / first.split("$schema=")[1]
        assert json.loads(target.read_text()) == schema  # the editor finds this very schema
        assert errors(parse(text), schema) == [], name
    load_suite(repo / "ci-evals.yaml")

    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q", "-b", "main")
    copy_feature_dev(elsewhere, "plugin")
    git(elsewhere, "add", "plugin")
    git(elsewhere, "commit", "-q", "-m", "the plugin")
    drafted = cli(elsewhere, "init", "plugin", "--stages", "explore,implement")
    assert drafted.returncode == 0, drafted.stderr
    for name, schema in (("ci-evals.yaml", SUITE_SCHEMA), ("stage_map.yaml", MAP_SCHEMA)):
        text = (elsewhere / name).read_text()
        assert "yaml-language-server" not in text  # this install is outside that repository
        assert errors(parse(text), schema) == [], name


# ------------------------------------------------------------ refused keys are refused


def _suite_refusals() -> list[tuple[str, list[Any]]]:
    """(where, path into the example's document) of each level an unknown key is
    placed at: the path names a mapping of the document."""
    return [
        ("top", []),
        ("stage", ["stages", 0]),
        ("limits", ["limits"]),
        ("stage limits", ["stages", 0, "limits"]),
        ("scenario", ["scenarios", 0]),
        ("reviewer", ["stages", 2, "reviewer"]),
        ("check", ["stages", 2, "checks", 0]),
        ("scoring", ["scoring"]),
    ]


@pytest.mark.parametrize(("where", "path"), _suite_refusals())
def test_a_key_the_suite_loader_refuses_the_schema_refuses(
    where: str, path: list[Any], tmp_path: Path
) -> None:
    example = copy_example(tmp_path / "ex")
    document = read_yaml(example.root / "ci-evals.yaml")
    document.setdefault("scoring", {"checklist": "all-pass"})
    node = document
    for step in path:
        node = node[step]
    assert isinstance(node, dict), (where, node)
    assert errors(document, SUITE_SCHEMA) == []  # before: valid
    node["not_a_key"] = 1
    (example.root / "ci-evals.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(UserError, match="unknown key 'not_a_key'"):
        load_suite(example.root / "ci-evals.yaml")
    assert any("not_a_key" in line for line in errors(document, SUITE_SCHEMA)), where


@pytest.mark.parametrize(("where", "path"), [("top", []), ("entry", ["entries", 0])])
def test_a_key_the_map_loader_refuses_the_schema_refuses(
    where: str, path: list[Any], tmp_path: Path
) -> None:
    example = copy_example(tmp_path / "ex")
    git(example.root, "init", "-q")  # a map lives in a repository
    document = read_yaml(example.root / "stage_map.yaml")
    node = document
    for step in path:
        node = node[step]
    assert errors(document, MAP_SCHEMA) == []
    node["not_a_key"] = 1
    (example.root / "stage_map.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(UserError, match="unknown key 'not_a_key'"):
        load_stage_map(example.root / "stage_map.yaml")
    assert any("not_a_key" in line for line in errors(document, MAP_SCHEMA)), where


def test_a_map_with_both_stages_and_evals_is_refused_by_both(tmp_path: Path) -> None:
    document = read_yaml(PROJECT / "stage_map.yaml")
    document["evals"] = "evals"
    assert errors(document, MAP_SCHEMA)
    del document["stages"], document["evals"]
    assert errors(document, MAP_SCHEMA)  # neither: the loader asks for stages


@pytest.mark.xfail(
    strict=True, reason="known gap: the schema does not say which keys a check requires"
)
def test_shipped_checks_schema_refuses_what_the_check_loader_refuses() -> None:
    """Known gap (found in issue 37's review, as old as the schema): the shipped schema
    holds each check's keys, not which are required, so an editor accepts what the
    loader refuses. Strict xfail: it fails loudly once the schema is fixed."""
    schema = json.loads(
        (Path(ci_evals.__file__).parent / "schemas/ci-evals.schema.json").read_text()
    )
    items = schema["properties"]["stages"]["items"]["properties"]["checks"]["items"]
    validator = jsonschema.Draft202012Validator(items)
    refused_by_the_loader = [
        {"headings": "a.md"},  # missing required key 'require'
        {"headings": "a.md", "require": []},  # as_str_list(allow_empty=False)
        {"front_matter": "a.md"},  # missing required key 'require'
        {"json_schema": "a.json"},  # missing required key 'schema'
        {"equals_length": "a.json", "field": "n"},  # missing required key 'array'
        {"trajectory": {}},  # names exactly one of tool, skill, subagent, hook
        {"trajectory": {"tool": "Bash", "skill": "x"}},
    ]
    accepted = [case for case in refused_by_the_loader if validator.is_valid(case)]
    assert not accepted, f"the schema accepts what the loader refuses: {accepted}"
