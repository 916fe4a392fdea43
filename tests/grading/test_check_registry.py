"""A kind of check is one place: its class, named by one line of the check registry.

For every kind the registry names, with nothing else listing it: the suite
loader loads the YAML docs/grading.md shows for it, the shipped JSON Schema
accepts that YAML, the `checks` grader runs it (and leaves it out where there is
no trajectory exactly when the kind says it reads one), and the docs' table of
checks has its row, in the registry's order. (The schema's branch is the kind's
`keys`: tests/suite/test_config_schemas.py.)
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import ci_evals
from ci_evals.errors import UserError
from ci_evals.grading.kinds.base import GradeContext
from ci_evals.grading.kinds.checks.grader import ChecksGrader
from ci_evals.grading.kinds.checks.registry import CHECK_KINDS
from ci_evals.suite.load import load_suite
from tests.paths import REPO

GRADING_DOC = REPO / "docs" / "grading.md"
SUITE_SCHEMA = json.loads(
    (Path(ci_evals.__file__).parent / "schemas" / "ci-evals.schema.json").read_text()
)
CHECK_SCHEMA = SUITE_SCHEMA["properties"]["stages"]["items"]["properties"]["checks"]["items"]
# A row of the table under "## Checks": | kind | passes when | YAML examples, ` · `-separated |
ROW = re.compile(r"^\| (\w+) \| .* \| (`\{.*)\|$", re.M)


def documented() -> dict[str, list[str]]:
    """The table of checks in docs/grading.md: each kind's YAML examples (the ones
    that are a whole check, `{ ... }`)."""
    section = GRADING_DOC.read_text(encoding="utf-8").split("\n## Checks\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    return {
        kind: [part.strip().strip("`") for part in cell.split(" · ") if part.startswith("`{")]
        for kind, cell in ROW.findall(section)
    }


def test_the_docs_table_lists_the_registered_kinds_in_order() -> None:
    assert list(documented()) == list(CHECK_KINDS.builtin)


def test_the_check_registry_holds_its_built_ins_alone() -> None:
    # No entry-point group: no package's name is looked up, none is offered.
    assert CHECK_KINDS.names() == CHECK_KINDS.builtin
    with pytest.raises(UserError) as info:
        CHECK_KINDS.get("filez")
    assert (info.value.message, info.value.hint) == (
        "unknown check kind 'filez'",
        "known: files, headings, front_matter, json_schema, equals_length, trajectory",
    )


@pytest.mark.parametrize("name", CHECK_KINDS.builtin)
def test_a_registered_kind_is_loaded_validated_and_run(tmp_path: Path, name: str) -> None:
    kind = CHECK_KINDS.get(name)
    assert next(iter(kind.keys)) == name  # the key that names it comes first
    examples = documented()[name]
    assert examples, f"docs/grading.md shows no `{{ {name}: ... }}` example"

    # Each example through the real suite loader, as one stage's checks.
    plugin = tmp_path / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "demo"}')
    (plugin / "templates").mkdir()
    (plugin / "templates" / "plan.schema.json").write_text('{"type": "object"}')
    items = "".join(
        f"      - {{ id: example-{n}, {example.strip()[1:].strip()}\n"
        for n, example in enumerate(examples)
    )
    suite_file = tmp_path / "ci-evals.yaml"
    suite_file.write_text(
        "version: 1\nplugin: plugin\nstage_map: null\n"
        + textwrap.dedent(
            """\
            stages:
              - name: only
                prompt: go
                checks:
            """
        )
        + items
        + "scenarios:\n  - id: one\n"
    )
    for example in examples:
        check: Any = yaml.safe_load(example)
        assert list(jsonschema.Draft202012Validator(CHECK_SCHEMA).iter_errors(check)) == []
    suite = load_suite(suite_file)
    (grader,) = suite.stages[0].grading.graders
    assert isinstance(grader, ChecksGrader)
    assert [type(c) for c in grader.checks] == [kind] * len(examples)

    # Run on an empty folder with no trajectory: each is one failed criterion, saying why.
    empty = tmp_path / "empty"
    empty.mkdir()
    result = grader.grade(GradeContext(folder=empty, trajectory=None))
    ids = [f"example-{n}" for n in range(len(examples))]
    assert [(c.id, c.passed, c.source) for c in result.criteria] == [
        (i, False, "check") for i in ids
    ]
    assert all(c.detail for c in result.criteria)
    kept = [c.id for c in grader.files_only().checks]
    assert kept == ([] if all(c.reads_trajectory for c in grader.checks) else ids)
