"""Phase contracts: loading (a consumed item must be produced earlier), the checks they
compile to, and the fixtures of the labsmith example checked against them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.grading.kinds.checks.run import run_checks
from ci_evals.main import main
from ci_evals.suite.contracts import pointer_schema
from ci_evals.suite.load import load_suite
from tests.conftest import ExampleLayout, git


def _suite(tmp_path: Path, stages: str, seed: dict[str, str] | None = None) -> Path:
    plugin = tmp_path / "plugin" / ".claude-plugin"
    plugin.mkdir(parents=True)
    (plugin / "plugin.json").write_text('{"name": "p"}')
    for rel, text in (seed or {}).items():
        path = tmp_path / "fixtures" / "0-seed" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    suite = tmp_path / "ci-evals.yaml"
    suite.write_text("version: 1\nplugin: plugin\nstage_map: null\nstages:\n" + stages)
    return suite


TWO = """\
  - name: plan
    prompt: p
    produces:
      - { files: plan.json, schema: { type: object, required: [chapters], properties: { chapters: { type: array, items: { type: object, required: [slug] } } } } }
      - { files: "lab.md", headings: ["## Chapters", "## Setup > ### Tools"] }
  - name: write
    prompt: w
    consumes:
"""  # noqa: E501


@pytest.mark.parametrize(
    ("consumes", "message"),
    [
        (
            '      - { file: lab.md, headings: ["## Outline"] }\n',
            "ci-evals.yaml:13:9: stages[1].consumes[0]: stage 2 (write) consumes heading "
            "'## Outline' of lab.md, but stage 1 (plan) does not produce it (its contract: line 9)",
        ),
        (
            "      - { file: plan.json, fields: [/chapters/*/title] }\n",
            "stage 2 (write) consumes field /chapters/*/title of plan.json, but stage 1 (plan) "
            "does not produce it (its contract: line 8)",
        ),
        (
            '      - { file: notes.md, headings: ["## A"] }\n',
            "stage 2 (write) consumes notes.md, but no earlier stage's contract produces it, "
            "and no seed fixture",
        ),
        (
            '      - { file: lab.md, from: write, headings: ["## Chapters"] }\n',
            "stages[1].consumes[0].from: 'from' must name a stage before stage 2, got 'write'",
        ),
        ("      - { file: lab.md }\n", "say what is read of the file"),
        ("      - { file: plan.json, fields: [chapters] }\n", "'chapters' is not a JSON pointer"),
    ],
)
def test_a_consumed_item_must_be_produced_by_an_earlier_stage(
    tmp_path: Path, consumes: str, message: str
) -> None:
    with pytest.raises(UserError) as info:
        load_suite(_suite(tmp_path, TWO + consumes), "ci-evals.yaml")
    assert message in str(info.value)


def test_what_an_earlier_contract_guarantees_is_accepted(tmp_path: Path) -> None:
    consumes = (
        "      - { file: plan.json, fields: [/chapters, /chapters/*/slug] }\n"  # by the schema
        '      - { file: lab.md, headings: ["Chapters", "## Setup > ### Tools"] }\n'
        '      - { file: brief.md, headings: ["## Goal"] }\n'  # the seed holds it
    )
    suite = load_suite(_suite(tmp_path, TWO + consumes, {"brief.md": "# B\n"}), "ci-evals.yaml")
    contract = suite.stages[1].contract
    assert contract is not None
    assert [(c.file, c.producer) for c in contract.consumes] == [
        ("plan.json", 1),
        ("lab.md", 1),
        ("brief.md", 0),
    ]
    # The producing stage is graded by its contract, a grader of its own.
    assert [g.name for g in suite.stages[0].grading.graders] == ["contract"]


def test_a_contract_compiles_to_checks_that_name_the_field(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path, TWO + '      - { file: lab.md, headings: ["Chapters"] }\n'))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "plan.json").write_text(json.dumps({"chapters": [{"slug": "a"}, {}]}))
    (tmp_path / "ws" / "lab.md").write_text("# L\n## Chapters\n### Tools\n## Setup\n")
    grader = suite.stages[0].contract.grader()  # type: ignore[union-attr]
    assert grader is not None
    result = run_checks(grader.checks, tmp_path / "ws", grader="contract")
    failed = {c.id: c.detail for c in result.criteria if not c.passed}
    assert failed == {
        "contract:produces[0].schema": "plan.json: at chapters/1: 'slug' is a required property",
        # `### Tools` is there, but not inside `## Setup`.
        "contract:produces[1].headings": "lab.md: missing '## Setup > ### Tools'",
    }
    assert result.grader == "contract"


def test_a_json_pointer_becomes_a_schema_requiring_it(tmp_path: Path) -> None:
    schema = pointer_schema(["/chapters/*/slug", "/meta/0/id", "/a~1b"])
    assert schema["properties"]["chapters"]["items"]["required"] == ["slug"]
    assert schema["properties"]["meta"]["minItems"] == 1
    assert schema["required"] == ["chapters", "meta", "a/b"]


def test_front_matter_fields(tmp_path: Path) -> None:
    stages = (
        "  - name: one\n    prompt: p\n"
        "    produces: [{ files: 'agents/*.md', min: 2, front_matter: [name, tools] }]\n"
    )
    suite = load_suite(_suite(tmp_path, stages))
    (tmp_path / "ws" / "agents").mkdir(parents=True)
    (tmp_path / "ws" / "agents" / "a.md").write_text("---\nname: a\ntools: Read\n---\nbody\n")
    (tmp_path / "ws" / "agents" / "b.md").write_text("---\nname: b\n---\n")
    grader = suite.stages[0].contract.grader()  # type: ignore[union-attr]
    assert grader is not None
    result = run_checks(grader.checks, tmp_path / "ws")
    assert [(c.id, c.passed, c.detail) for c in result.criteria] == [
        ("contract:produces[0].files", True, "2 file(s) match agents/*.md, expected at least 2: "
         "agents/a.md, agents/b.md"),
        ("contract:produces[0].front_matter", False, "agents/b.md: front matter lacks 'tools'"),
    ]  # fmt: skip


# -- the example ----------------------------------------------------------------


@pytest.fixture
def example(labsmith: ExampleLayout) -> Path:
    return labsmith.root


def _contracts(capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["check-fixtures", "--suite", "ci-evals.yaml", "--contracts-only"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_example_fixtures_hold_every_contract(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _contracts(capsys)
    assert (code, out) == (0, "contracts: 28 item(s) hold on the fixtures\n")


def test_renaming_a_heading_stage_4_reads_makes_the_fixtures_stale(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stage 3's contract renames `## Environment` and stage 4 follows: the fixtures
    (both sets) still have the old heading, and are found stale before any model."""
    suite = example / "ci-evals.yaml"
    text = suite.read_text()
    text = text.replace('"## Prerequisites", "## Environment", "## Chapters"', '"## Prerequisites", "## Setup", "## Chapters"')  # fmt: skip  # noqa: E501
    text = text.replace('headings: ["## Prerequisites", "## Environment"] }', 'headings: ["## Prerequisites", "## Setup"] }')  # fmt: skip  # noqa: E501
    suite.write_text(text)

    code, out, _ = _contracts(capsys)
    assert code == 1
    lines = out.splitlines()
    stale = "fixtures/3-plan-lab-output/lab/lab.md: missing '## Setup' -- "
    assert stale + "stage 3 (plan-lab) produces[0].headings, ci-evals.yaml:41" in lines
    assert (
        stale + "stage 4 (plan-chapter) consumes[1].headings (produced by stage 3 (plan-lab)), "
        "ci-evals.yaml:64"
    ) in lines
    assert "fixtures/acme-arm-students/3-plan-lab-output/lab/lab.md: missing '## Setup'" in out
    assert lines[-1].startswith("4 contract problem(s) in the fixtures")


def test_renaming_it_in_stage_3_alone_is_a_load_error_naming_both_stages(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = example / "ci-evals.yaml"
    suite.write_text(suite.read_text().replace('"## Environment", "## Chapters"', '"## Setup", "## Chapters"'))  # fmt: skip  # noqa: E501

    code, _, err = _contracts(capsys)
    assert code == 2
    assert err.startswith(
        "ci-evals: error: ci-evals.yaml:64:9: stages[3].consumes[1]: stage 4 (plan-chapter) "
        "consumes heading '## Environment' of lab/lab.md, but stage 3 (plan-lab) does not "
        "produce it (its contract: line 41)"
    )
    assert len(err.splitlines()) == 1


def test_a_missing_fixture_file_names_the_folder_that_should_hold_it(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (example / "fixtures" / "3-plan-lab-output" / "lab" / "plan.json").unlink()

    code, out, _ = _contracts(capsys)
    assert code == 1
    assert (
        "fixtures/3-plan-lab-output: 0 file(s) match lab/plan.json, expected at least 1 -- "
        "stage 4 (plan-chapter) consumes[0].file (produced by stage 3 (plan-lab)), ci-evals.yaml:63"
    ) in out.splitlines()
    assert "stage 3 (plan-lab) produces[1].files, ci-evals.yaml:42" in out


def test_a_schema_file_beside_the_suite_must_be_reached_by_the_stage_map(
    labsmith: ExampleLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    """A contract's schema is part of what the stage is graded on: a change to a
    suite-relative schema the stage map does not reach would make compute-stage
    answer `none` (it is under no root, global or fixture)."""
    schemas = labsmith.root / "schemas"
    schemas.mkdir()
    schema = schemas / "plan.schema.json"
    schema.write_text((labsmith.plugin / "templates/plan.schema.json").read_text())
    suite = labsmith.suite
    suite.write_text(
        suite.read_text().replace("plugin:templates/plan.schema.json", "schemas/plan.schema.json")
    )
    with pytest.raises(UserError) as info:
        load_suite(suite, display="ci-evals.yaml")
    text = str(info.value)
    assert text.startswith("ci-evals.yaml:42:")
    assert (
        "stages[2].produces[1].schema: the schema schemas/plan.schema.json is in no stage" in text
    )
    assert "add 'schemas' to its global:" in text

    stage_map = labsmith.stage_map
    stage_map.write_text(
        stage_map.read_text().replace(
            "  - /examples/labsmith/stub\n", "  - /examples/labsmith/stub\n  - /schemas\n"
        )
    )
    load_suite(suite)
    git(labsmith.root, "add", "-A")
    git(labsmith.root, "commit", "-q", "-m", "the example, its schema beside the suite")
    git(labsmith.root, "checkout", "-q", "-b", "change")
    schema.write_text(schema.read_text().replace('"type"', '"description": "a plan", "type"', 1))
    git(labsmith.root, "commit", "-qam", "the schema changes")
    assert main(["compute-stage", "main", "--map", "stage_map.yaml"]) == 0
    assert capsys.readouterr().out == "1\n"
