"""Properties of the scorecard parser over generated input: it never passes junk."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ci_evals.grading.reviewer import rubrics
from ci_evals.grading.reviewer.scorecard import ScorecardError, parse_scorecard

IDS = ["has-goals", "has-outline", "coherence", "pacing"]
KIND = {
    "has-goals": "checklist",
    "has-outline": "checklist",
    "coherence": "analytic",
    "pacing": "analytic",
}

# Prose that may contain brackets and braces, but no fences and no JSON arrays of objects.
prose = st.text(
    alphabet=st.sampled_from(list("abc xyz.,:;!?\n[]{}()\"'0123456789-")), max_size=80
).filter(lambda t: "[{" not in t.replace(" ", "").replace("\n", ""))

item = st.sampled_from(IDS).flatmap(
    lambda cid: st.fixed_dictionaries(
        {
            "criterion": st.just(cid),
            "score": st.sampled_from([0, 1]) if KIND[cid] == "checklist" else st.integers(1, 5),
        },
        optional={"rationale": st.text(max_size=20)},
    )
)
scorecards = st.lists(item, min_size=1, max_size=4, unique_by=lambda i: i["criterion"])


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=200))
def test_arbitrary_text_is_parsed_or_refused_never_crashes(
    rubric_set: rubrics.RubricSet, text: str
) -> None:
    try:
        criteria = parse_scorecard(text, rubric_set)
    except ScorecardError as exc:
        assert exc.reason and "\n" not in exc.reason
        return
    # Anything accepted is a real scorecard: known ids, in-scale scores.
    assert criteria
    for c in criteria:
        assert c.id in IDS
        assert c.score is not None
        assert c.score in (0, 1) if c.kind == "checklist" else 1 <= c.score <= 5


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# (If the text as a whole is valid JSON, it is the answer: `[` + card + `]` is
# an array of arrays, rightly refused. So `before` never opens with a bracket.)
@given(
    before=prose.filter(lambda t: not t.strip() or t.strip()[0] not in "[{"),
    card=scorecards,
    after=prose,
    fenced=st.booleans(),
)
def test_a_scorecard_in_prose_is_found_exactly(
    rubric_set: rubrics.RubricSet,
    before: str,
    card: list[dict[str, object]],
    after: str,
    fenced: bool,
) -> None:
    body = json.dumps(card)
    text = f"{before}\n```json\n{body}\n```\n{after}" if fenced else f"{before}\n{body}\n{after}"
    criteria = parse_scorecard(text, rubric_set)
    assert [(c.id, c.score) for c in criteria] == [(i["criterion"], i["score"]) for i in card]
    for c in criteria:
        assert c.kind == KIND[c.id]  # from the rubric, whatever the score
