"""Scorecards that cannot be trusted are errors, never a crash and never a pass:
a score too big for a float, and two scorecards that disagree."""

from __future__ import annotations

import json

import pytest

from ci_evals.grading.reviewer import rubrics
from ci_evals.grading.reviewer.scorecard import ScorecardError, grade_scorecard, parse_scorecard

PASSING = [
    {"criterion": "has-goals", "score": 1},
    {"criterion": "coherence", "score": 5},
]
FAILING = [
    {"criterion": "has-goals", "score": 0},
    {"criterion": "coherence", "score": 1},
]
HUGE = "1" + "0" * 400  # an integer no float can hold


@pytest.mark.parametrize("criterion", ["has-goals", "coherence"])
@pytest.mark.parametrize("score", [HUGE, "-" + HUGE, "1e400", "-1e400"])
def test_a_score_too_big_for_a_float_is_a_scorecard_error(
    rubric_set: rubrics.RubricSet, criterion: str, score: str
) -> None:
    text = f'[{{"criterion": "{criterion}", "score": {score}}}]'
    with pytest.raises(ScorecardError) as info:
        parse_scorecard(text, rubric_set)
    reason = info.value.reason
    assert "score must be a finite number" in reason
    assert "\n" not in reason
    assert len(reason) < 200  # the 400 digits are not repeated in full


def test_a_huge_score_as_a_grader_result_is_an_error(rubric_set: rubrics.RubricSet) -> None:
    result = grade_scorecard(f'[{{"criterion": "coherence", "score": {HUGE}}}]', rubric_set)
    assert result.criteria == ()
    assert result.error is not None
    assert result.error.startswith("unusable scorecard: item 0 ('coherence'): score must be a")


def test_a_large_in_range_integer_is_still_judged_by_its_scale(
    rubric_set: rubrics.RubricSet,
) -> None:
    with pytest.raises(ScorecardError, match=r"score 1000000000000000000000 is outside the ana"):
        parse_scorecard('[{"criterion": "coherence", "score": 1000000000000000000000}]', rubric_set)


@pytest.mark.parametrize(
    "text",
    [
        # The review's example: a passing fenced card, then a failing one in prose.
        f"```json\n{json.dumps(PASSING)}\n```\n"
        f"On reflection, the real scores are: {json.dumps(FAILING)}",
        # The other way round: whichever came last used to win.
        f"```json\n{json.dumps(FAILING)}\n```\nOn reflection: {json.dumps(PASSING)}",
        f"Draft: {json.dumps(FAILING)}\nFinal: {json.dumps(PASSING)}",
        f"```json\n{json.dumps(PASSING)}\n```\n```json\n{json.dumps(FAILING)}\n```",
        # A card that differs only in one score.
        f"{json.dumps(PASSING)}\nor rather {json.dumps([PASSING[0], {**PASSING[1], 'score': 4}])}",
        # One of them not even valid as a card still makes the answer ambiguous.
        f"```json\n{json.dumps(PASSING)}\n```\nAlso: " + '[{"score": 7}]',
    ],
)
def test_two_scorecards_that_disagree_are_ambiguous(
    rubric_set: rubrics.RubricSet, text: str
) -> None:
    with pytest.raises(ScorecardError, match="2 different scorecards") as info:
        parse_scorecard(text, rubric_set)
    assert "\n" not in info.value.reason
    assert grade_scorecard(text, rubric_set).error is not None


def test_three_different_scorecards_are_counted(rubric_set: rubrics.RubricSet) -> None:
    third = [{"criterion": "has-goals", "score": 1}]
    text = f"{json.dumps(PASSING)} then {json.dumps(FAILING)} then {json.dumps(third)}"
    with pytest.raises(ScorecardError, match="3 different scorecards"):
        parse_scorecard(text, rubric_set)


@pytest.mark.parametrize(
    "text",
    [
        f"```json\n{json.dumps(PASSING)}\n```\nTo repeat: {json.dumps(PASSING)}",
        f"{json.dumps(PASSING)}\n\n```json\n{json.dumps(PASSING, indent=2)}\n```",
        # Arrays of objects that are not scorecards (no criterion, no score) are prose.
        'The plan lists [{"title": "Intro"}, {"title": "Arms"}].\n'
        f"```json\n{json.dumps(PASSING)}\n```",
    ],
)
def test_the_same_scorecard_repeated_or_other_json_is_accepted(
    rubric_set: rubrics.RubricSet, text: str
) -> None:
    criteria = parse_scorecard(text, rubric_set)
    assert [(c.id, c.score) for c in criteria] == [("has-goals", 1.0), ("coherence", 5.0)]


def test_other_json_after_the_scorecard_does_not_replace_it(
    rubric_set: rubrics.RubricSet,
) -> None:
    text = json.dumps(PASSING) + '\nThe plan lists [{"title": "Intro"}].'
    assert len(parse_scorecard(text, rubric_set)) == 2
