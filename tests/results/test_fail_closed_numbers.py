"""NaN, infinities and numbers too big for a float are refused at load, with file:line.

A NaN compares false with every bound (`nan < 1.0` and `nan > 5.0` are both
false), so without a check it slips through every minimum and maximum: a
`.nan` threshold passed everything, a `.nan` budget turned the budget off.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from ci_evals.config.yaml_source import loads
from ci_evals.endpoints.stub_model.script import loads_script
from ci_evals.errors import UserError
from ci_evals.main import main
from ci_evals.suite.load import load_suite
from tests.run_helpers import make_suite

BAD = [".nan", ".NaN", ".inf", "-.inf", "+.Inf", "1.0e+400", "1" + "0" * 400]


def _suite(root: Path, head: str = "", stage: str = "", grading: str = "") -> Path:
    plugin = root / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True, exist_ok=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "demo"}')
    (plugin / "commands").mkdir(exist_ok=True)
    (plugin / "commands" / "a.md").write_text("Do it.\n")
    path = root / "ci-evals.yaml"
    path.write_text(
        "version: 1\nplugin: plugin\nstage_map: null\n"
        + head
        + "stages:\n  - name: a\n    prompt: /demo:a\n"
        + textwrap.indent(stage, "    ")
        + grading
    )
    return path


# (where the value goes, the field named in the error)
SUITE_FIELDS = [
    ({"head": "budget_usd: {v}\n"}, "budget_usd"),
    ({"head": "limits: {{timeout_s: {v}}}\n"}, "limits.timeout_s"),
    ({"head": "limits: {{max_budget_usd: {v}}}\n"}, "limits.max_budget_usd"),
    ({"stage": "limits: {{timeout_s: {v}}}\n"}, "stages[0].limits.timeout_s"),
    ({"stage": "limits: {{max_budget_usd: {v}}}\n"}, "stages[0].limits.max_budget_usd"),
    ({"grading": "scoring: {{analytic_mean_at_least: {v}}}\n"}, "scoring.analytic_mean_at_least"),
    ({"grading": "scoring: {{binary_score_at_least: {v}}}\n"}, "scoring.binary_score_at_least"),
    ({"grading": "scoring: {{weights: {{x: {v}}}}}\n"}, "scoring.weights.x"),
    (
        {"stage": "scoring: {{analytic_mean_at_least: {v}}}\n"},
        "stages[0].scoring.analytic_mean_at_least",
    ),
    (
        {"stage": 'graders: [{{id: g, command: ["true"], timeout_s: {v}}}]\n'},
        "stages[0].graders[0].timeout_s",
    ),
    (
        {"stage": "checks: [{{json_schema: a.json, schema: {{maximum: {v}}}}}]\n"},
        "stages[0].checks[0].schema",
    ),
]


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize(("where", "field"), SUITE_FIELDS)
def test_every_float_field_of_the_suite_refuses_non_finite_numbers(
    tmp_path: Path, where: dict[str, str], field: str, value: str
) -> None:
    path = _suite(tmp_path, **{k: v.format(v=value) for k, v in where.items()})
    if field.endswith(".schema") and value.isdigit():
        load_suite(path)  # a big integer is exact in a JSON Schema: nothing to refuse
        return
    with pytest.raises(UserError) as info:
        load_suite(path)
    text = str(info.value)
    assert re.match(rf"{re.escape(str(path))}:\d+:\d+: ", text), text
    assert field in text
    assert "finite" in text or "too large" in text
    assert "\n" not in text


@pytest.mark.parametrize("value", [".nan", ".inf", "1.0e+400"])
def test_a_scenario_input_that_is_not_a_finite_number_is_refused(
    tmp_path: Path, value: str
) -> None:
    path = _suite(tmp_path, grading=f"scenarios:\n  - {{id: s, inputs: {{company: {value}}}}}\n")
    with pytest.raises(
        UserError, match=r"scenarios\[0\]\.inputs\.company: (must be a finite|number too large)"
    ):
        load_suite(path)
    # Quoted, it is text.
    path = _suite(tmp_path, grading=f"scenarios:\n  - {{id: s, inputs: {{company: '{value}'}}}}\n")
    assert load_suite(path).scenarios[0].inputs["company"] == value


def test_finite_numbers_still_load(tmp_path: Path) -> None:
    path = _suite(
        tmp_path,
        head="budget_usd: 5\nlimits: {timeout_s: 0.5, max_budget_usd: 1.5}\n",
        grading="scoring: {analytic_mean_at_least: 3.5, weights: {x: 0}}\n",
    )
    suite = load_suite(path)
    assert (suite.budget_usd, suite.limits.timeout_s, suite.limits.max_budget_usd) == (5, 0.5, 1.5)


@pytest.mark.parametrize(
    ("script", "field"),
    [
        (
            "rules:\n  - turns:\n      - {{text: hi, delay: {v}}}\n",
            "rules[0].turns[0].delay",
        ),
        (
            "rules:\n  - turns:\n      - {{fault: {{hang: {v}}}}}\n",
            "rules[0].turns[0].fault.hang",
        ),
        (
            "rules:\n  - turns:\n      - tools: [{{tool: {{name: X, input: {{n: {v}}}}}}}]\n",
            "rules[0].turns[0].tools[0].tool.input",
        ),
    ],
)
@pytest.mark.parametrize("value", [".nan", ".inf", "1.0e+400"])
def test_the_stub_script_refuses_non_finite_numbers(script: str, field: str, value: str) -> None:
    with pytest.raises(UserError) as info:
        loads_script(script.format(v=value), "stub.yaml")
    assert re.match(r"stub\.yaml:\d+:\d+: ", str(info.value)), str(info.value)
    assert field in str(info.value)


def test_free_form_values_with_recursive_aliases_do_not_hang() -> None:
    root = loads("a: &x [1, *x]\n", "x.yaml")
    assert isinstance(root.mapping({"a"})["a"].plain(), list)


def test_run_with_a_nan_threshold_stops_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, stub = make_suite(tmp_path)
    suite.write_text(suite.read_text() + "scoring: {analytic_mean_at_least: .nan}\n")
    code = main(["run", "--suite", str(suite), "--model", f"stub:{stub}", "--out", "out"])
    err = capsys.readouterr().err
    assert code == 2
    assert "scoring.analytic_mean_at_least: must be a finite number, got .nan" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
