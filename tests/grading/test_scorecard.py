from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from ci_evals.grading.reviewer import rubrics
from ci_evals.grading.reviewer.scorecard import ScorecardError, grade_scorecard, parse_scorecard
from ci_evals.results.criteria import GraderResult

VALID = [
    {"criterion": "has-goals", "score": 1, "rationale": "goals listed"},
    {"criterion": "has-outline", "score": 1},
    {"id": "coherence", "score": 4, "rationale": "tight"},
    {"criterion": "pacing", "score": 3, "type": "analytic"},
]


def scores(criteria: list) -> dict[str, tuple[str, float, bool]]:  # type: ignore[type-arg]
    return {c.id: (c.kind, c.score, c.passed) for c in criteria}


def test_valid_array(rubric_set: rubrics.RubricSet) -> None:
    criteria = parse_scorecard(json.dumps(VALID), rubric_set)
    assert scores(criteria) == {
        "has-goals": ("checklist", 1.0, True),
        "has-outline": ("checklist", 1.0, True),
        "coherence": ("analytic", 4.0, True),
        "pacing": ("analytic", 3.0, True),
    }
    goals = criteria[0]
    assert goals.source == "reviewer"
    assert goals.rationale == "goals listed"
    assert goals.rubric is not None and goals.rubric.endswith("checklist/plan-lab/has-goals.md")
    assert goals.rubric_sha256 == rubric_set["has-goals"].sha256


def test_fenced_json(rubric_set: rubrics.RubricSet) -> None:
    text = "Here is the scorecard:\n\n```json\n" + json.dumps(VALID, indent=2) + "\n```\nDone."
    assert [c.id for c in parse_scorecard(text, rubric_set)] == [
        "has-goals",
        "has-outline",
        "coherence",
        "pacing",
    ]


def test_prose_then_json_with_brackets_in_the_prose(rubric_set: rubrics.RubricSet) -> None:
    text = (
        "I read lab.md [all 3 sections] and scored it, see [1].\n"
        "Final:\n" + json.dumps(VALID) + "\nThat is all [end]."
    )
    criteria = parse_scorecard(text, rubric_set)
    assert len(criteria) == 4
    assert scores(criteria)["pacing"] == ("analytic", 3.0, True)


def test_a_draft_that_disagrees_with_the_answer_is_ambiguous(
    rubric_set: rubrics.RubricSet,
) -> None:
    # Which one did the reviewer mean? Neither wins (see test_scorecard_ambiguity.py).
    draft = [{"criterion": "pacing", "score": 2}]
    text = f"```json\n{json.dumps(draft)}\n```\nrevised:\n```json\n{json.dumps(VALID)}\n```"
    with pytest.raises(ScorecardError, match="2 different scorecards"):
        parse_scorecard(text, rubric_set)


def test_analytic_one_is_a_failing_analytic_score(rubric_set: rubrics.RubricSet) -> None:
    # The seed's bug: a score of 1 made this a "passing checklist item".
    [criterion] = parse_scorecard('[{"criterion": "coherence", "score": 1}]', rubric_set)
    assert (criterion.kind, criterion.score, criterion.passed) == ("analytic", 1.0, False)


def test_checklist_zero_fails(rubric_set: rubrics.RubricSet) -> None:
    [criterion] = parse_scorecard('[{"criterion": "has-goals", "score": 0}]', rubric_set)
    assert (criterion.kind, criterion.passed) == ("checklist", False)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "output is empty"),
        ("The lab looks great, all criteria pass.", "no JSON array found"),
        ('[{"criterion": "has-goals", "score": 1,}]', "invalid JSON: Expecting property name"),
        ('```json\n[{"criterion": "has-goals" "score": 1}]\n```', "invalid JSON in the fenced"),
        ("Scores:\n[{'criterion': 'has-goals', 'score': 1}]", "invalid JSON"),
        ("[]", "empty JSON array"),
        ("```json\n[]\n```", "empty JSON array"),
        ('{"criterion": "has-goals", "score": 1}', "not an array (got dict)"),
        ('["has-goals", 1]', "item 0 is not an object (got a string)"),
        ('[{"score": 1}]', "item 0: missing 'criterion' (or 'id')"),
        ('[{"criterion": "has-goals"}]', "missing score"),
        ('[{"criterion": "has-goals", "score": null}]', "missing score"),
        ('[{"criterion": "has-goals", "score": "1"}]', 'score must be a number, got "1"'),
        ('[{"criterion": "has-goals", "score": true}]', "score must be a number, got true"),
        ('[{"criterion": "has-goals", "score": NaN}]', "NaN is not valid JSON"),
        ('[{"criterion": "coherence", "score": 7}]', "score 7 is outside the analytic scale 1-5"),
        ('[{"criterion": "coherence", "score": 0}]', "outside the analytic scale"),
        ('[{"criterion": "has-goals", "score": 7}]', "score 7 is outside the checklist scale"),
        ('[{"criterion": "has-goals", "score": 0.5}]', "outside the checklist scale"),
        ('[{"criterion": "tone", "score": 1}]', "no rubric defines this criterion"),
        (
            '[{"criterion": "has-goals", "score": 1}, {"id": "Has_Goals", "score": 0}]',
            "item 1: criterion 'has-goals' is scored twice (also item 0)",
        ),
        ('[{"criterion": "coherence", "score": 4, "type": "checklist"}]', "disagrees"),
        ('[{"criterion": "coherence", "score": 4, "type": "likert"}]', "type must be"),
        ('[{"criterion": "coherence", "id": "pacing", "score": 4}]', "disagree"),
        ('[{"criterion": "coherence", "score": 4, "rationale": 5}]', "rationale must be"),
    ],
)
def test_unusable_scorecards_fail_closed(
    rubric_set: rubrics.RubricSet, text: str, reason: str
) -> None:
    with pytest.raises(ScorecardError) as info:
        parse_scorecard(text, rubric_set)
    assert reason in info.value.reason
    assert "\n" not in info.value.reason


def test_rubric_without_a_kind_is_an_error_even_with_a_type(tmp_path: Path) -> None:
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "rubrics" / "tone.md").write_text("# Tone\n")
    found = rubrics.discover(tmp_path, ["rubrics"])
    with pytest.raises(ScorecardError, match="cannot tell checklist from analytic"):
        parse_scorecard('[{"criterion": "tone", "score": 1, "type": "checklist"}]', found)


def test_without_rubrics_the_type_field_is_required() -> None:
    [criterion] = parse_scorecard('[{"id": "tone", "score": 2, "type": "analytic"}]', None)
    assert (criterion.kind, criterion.passed, criterion.rubric) == ("analytic", False, None)
    with pytest.raises(ScorecardError, match="no 'type' given"):
        parse_scorecard('[{"id": "tone", "score": 1}]', None)


def test_require_all(rubric_set: rubrics.RubricSet) -> None:
    text = '[{"criterion": "has-goals", "score": 1}]'
    with pytest.raises(ScorecardError, match="does not score: coherence, has-outline, pacing"):
        parse_scorecard(text, rubric_set, require_all=True)


def test_grade_scorecard_keeps_raw_output_and_records_rubrics(
    rubric_set: rubrics.RubricSet, tmp_path: Path
) -> None:
    text = "Prose first.\n" + json.dumps(VALID[:3])
    raw = tmp_path / "run" / "scorecard.raw.txt"
    result = grade_scorecard(text, rubric_set, raw_path=raw, judge_model="claude-x")
    assert result.error is None
    assert raw.read_text() == text
    assert result.raw_output is not None
    assert result.raw_output.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert result.raw_output.path == str(raw)
    assert result.judge_model == "claude-x"
    assert {r.id: r.kind for r in result.rubrics} == {
        "has-goals": "checklist",
        "has-outline": "checklist",
        "coherence": "analytic",
        "pacing": "analytic",
    }
    assert result.warnings == ("rubric criteria not scored: pacing",)


def test_grade_scorecard_turns_bad_output_into_an_error(
    rubric_set: rubrics.RubricSet, tmp_path: Path
) -> None:
    raw = tmp_path / "scorecard.raw.txt"
    result = grade_scorecard("no scores, sorry", rubric_set, raw_path=raw)
    assert result.criteria == ()
    assert result.error == "unusable scorecard: no JSON array found in the reviewer's output"
    assert raw.read_text() == "no scores, sorry"  # kept for the person debugging it


def test_results_round_trip_through_json(rubric_set: rubrics.RubricSet) -> None:
    result = grade_scorecard(json.dumps(VALID), rubric_set)
    assert GraderResult.model_validate_json(result.model_dump_json()) == result


def test_json_then_trailing_prose(rubric_set: rubrics.RubricSet) -> None:
    text = json.dumps(VALID) + "\n\nThat is my review [final]."
    assert len(parse_scorecard(text, rubric_set)) == 4


def test_a_fence_in_a_rationale_does_not_hide_the_array(rubric_set: rubrics.RubricSet) -> None:
    items = [{"criterion": "has-goals", "score": 1, "rationale": "has ```code``` blocks"}]
    text = "```json\n" + json.dumps(items) + "\n```"
    [criterion] = parse_scorecard(text, rubric_set)
    assert criterion.rationale == "has ```code``` blocks"


def test_ids_take_the_rubric_spelling(rubric_set: rubrics.RubricSet) -> None:
    text = json.dumps(
        [{"criterion": "Has_Goals", "score": 1}, {"id": "analytic/plan-lab/Pacing.md", "score": 4}]
    )
    assert [c.id for c in parse_scorecard(text, rubric_set)] == ["has-goals", "pacing"]


def test_prose_brackets_wrapping_the_array(rubric_set: rubrics.RubricSet) -> None:
    text = "Scores (see [the list: " + json.dumps(VALID) + " ]) as requested."
    assert len(parse_scorecard(text, rubric_set)) == 4


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 100_000, "no JSON array found"),
        ("x " + '[{"a":' * 100_000, "too many bracketed fragments"),
        ("see [{x} " * 50_000 + json.dumps(VALID), "too many bracketed fragments"),
        ("x" * 1_000_001, "too large (1000001 characters, at most 1000000)"),
    ],
)
def test_hostile_output_is_refused_quickly(
    rubric_set: rubrics.RubricSet, text: str, reason: str
) -> None:
    # Deep nesting must not crash (RecursionError) and many fragments must not
    # make the search quadratic; either way the result is a refusal.
    with pytest.raises(ScorecardError, match=re.escape(reason)):
        parse_scorecard(text, rubric_set)


def test_many_prose_brackets_before_a_scorecard(rubric_set: rubrics.RubricSet) -> None:
    text = "see [x] and [1] " * 20_000 + json.dumps(VALID)
    assert len(parse_scorecard(text, rubric_set)) == 4
