from __future__ import annotations

import pytest

from ci_evals.config import yaml_source
from ci_evals.errors import UserError
from ci_evals.grading.config import load_policy
from ci_evals.results.criteria import Criterion, GraderResult
from ci_evals.results.verdict import PolicyOverride, ScoringPolicy, evaluate


def crit(cid: str, kind: str, score: float, source: str = "reviewer") -> Criterion:
    passed = score == 1 if kind == "checklist" else score >= 3
    return Criterion(id=cid, kind=kind, score=score, passed=passed, source=source)  # type: ignore[arg-type]


def reviewer(*criteria: Criterion) -> GraderResult:
    return GraderResult(grader="reviewer", criteria=criteria)


DEFAULT = ScoringPolicy()


def test_all_checklist_pass_and_mean_at_threshold_passes() -> None:
    verdict = evaluate(
        [reviewer(crit("a", "checklist", 1), crit("b", "analytic", 2), crit("c", "analytic", 4))],
        DEFAULT,
    )
    assert verdict.verdict == "passed"
    assert verdict.analytic_mean == 3.0
    assert verdict.checklist_all_passed is True
    # b scored 2 fails on its own (2 of 3 criteria passed), but the mean carries the stage.
    assert verdict.binary_score == pytest.approx(200 / 3)
    assert verdict.reason == "checklist 1/1; analytic mean 3.00; binary score 66.7"


def test_one_failed_checklist_item_fails() -> None:
    verdict = evaluate(
        [reviewer(crit("a", "checklist", 1), crit("b", "checklist", 0), crit("c", "analytic", 5))],
        DEFAULT,
    )
    assert verdict.verdict == "failed"
    assert verdict.checklist_all_passed is False
    assert verdict.reason == "checklist 1 of 2 failed: b"


def test_analytic_one_fails_the_mean() -> None:
    # An analytic 1 is the worst analytic score, not a passing checklist item.
    verdict = evaluate([reviewer(crit("a", "checklist", 1), crit("depth", "analytic", 1))], DEFAULT)
    assert verdict.verdict == "failed"
    assert verdict.analytic_mean == 1.0
    assert verdict.reason == "analytic mean 1.00 < 3 (low: depth)"


def test_threshold_and_weights() -> None:
    criteria = reviewer(crit("x", "analytic", 5), crit("y", "analytic", 2))
    assert evaluate([criteria], DEFAULT).verdict == "passed"  # mean 3.5
    strict = DEFAULT.merge(PolicyOverride(analytic_threshold=4.0))
    assert evaluate([criteria], strict).verdict == "failed"
    # y weighs 3: (5 + 3*2) / 4 = 2.75
    weighted = DEFAULT.merge(PolicyOverride(weights={"y": 3.0}))
    verdict = evaluate([criteria], weighted)
    assert verdict.analytic_mean == pytest.approx(2.75)
    assert verdict.verdict == "failed"
    assert verdict.binary_score == pytest.approx(25.0)  # x passed, weight 1 of 4
    assert [c.weight for c in verdict.criteria] == [1.0, 3.0]


def test_threshold_recomputes_each_analytic_criterion() -> None:
    verdict = evaluate(
        [reviewer(crit("x", "analytic", 3))], DEFAULT.merge(PolicyOverride(analytic_threshold=2.5))
    )
    assert verdict.criteria[0].passed is True
    verdict = evaluate(
        [reviewer(crit("x", "analytic", 3))], DEFAULT.merge(PolicyOverride(analytic_threshold=3.5))
    )
    assert verdict.criteria[0].passed is False


def test_advisory_criteria_report_but_do_not_fail() -> None:
    policy = DEFAULT.merge(PolicyOverride(advisory=frozenset({"Style_Nits"})))
    verdict = evaluate(
        [reviewer(crit("a", "checklist", 1), crit("style-nits", "checklist", 0))], policy
    )
    assert verdict.verdict == "passed"
    style = verdict.criteria[1]
    assert (style.advisory, style.passed) == (True, False)
    assert verdict.binary_score == 100.0  # advisory criteria are outside the score


def test_only_advisory_criteria_is_an_error() -> None:
    policy = DEFAULT.merge(PolicyOverride(advisory=frozenset({"a"})))
    verdict = evaluate([reviewer(crit("a", "checklist", 1))], policy)
    assert verdict.verdict == "error"
    assert "every criterion is advisory" in verdict.reason


def test_zero_criteria_is_an_error_not_a_pass() -> None:
    verdict = evaluate([reviewer()], DEFAULT)
    assert verdict.verdict == "error"
    assert verdict.error == "no criteria: the graders produced nothing to judge"
    assert evaluate([], DEFAULT).verdict == "error"


def test_a_grader_error_makes_the_stage_error_even_if_others_pass() -> None:
    good = GraderResult(grader="checks", criteria=(crit("files", "checklist", 1, "check"),))
    bad = GraderResult(grader="reviewer", error="unusable scorecard: empty JSON array")
    verdict = evaluate([good, bad], DEFAULT)
    assert verdict.verdict == "error"
    assert verdict.reason == "reviewer: unusable scorecard: empty JSON array"
    assert verdict.checklist_all_passed is True  # still reported


def test_binary_threshold() -> None:
    policy = DEFAULT.merge(PolicyOverride(binary_threshold=75, advisory=frozenset({"c"})))
    results = [
        GraderResult(
            grader="command:mcp",
            criteria=(
                crit("init", "checklist", 1, "command"),
                crit("tools", "checklist", 1, "command"),
                crit("c", "checklist", 0, "command"),
            ),
        )
    ]
    assert evaluate(results, policy).verdict == "passed"
    policy = DEFAULT.merge(PolicyOverride(binary_threshold=75))
    verdict = evaluate(results, policy)
    assert verdict.verdict == "failed"
    assert "binary score 66.7 < 75" in verdict.reason


def test_merge_suite_then_stage() -> None:
    suite = ScoringPolicy().merge(
        PolicyOverride(analytic_threshold=3.5, weights={"a": 2.0}, advisory=frozenset({"x"}))
    )
    stage = suite.merge(PolicyOverride(weights={"b": 0.5}, advisory=frozenset({"y"})))
    assert stage.analytic_threshold == 3.5
    assert dict(stage.weights) == {"a": 2.0, "b": 0.5}
    assert stage.advisory == {"x", "y"}
    assert suite.advisory == {"x"}  # frozen: merge returns a new policy
    assert stage.merge(PolicyOverride(weights={"a": 1.0})).weight("A") == 1.0


def test_load_policy_from_yaml() -> None:
    field = yaml_source.loads(
        "checklist: all-pass\n"
        "analytic_mean_at_least: 3.5\n"
        "weights: {coherence: 2, Has_Goals: 0.5}\n"
        "advisory: [style-nits]\n"
        "binary_score_at_least: 80\n",
        "ci-evals.yaml",
    )
    override = load_policy(field)
    assert override.analytic_threshold == 3.5
    assert dict(override.weights) == {"coherence": 2.0, "has-goals": 0.5}
    assert override.advisory == {"style-nits"}
    assert override.binary_threshold == 80.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "analytic_mean_at_least: 6\n",
            "ci-evals.yaml:1:25: analytic_mean_at_least: must be at most 5",
        ),
        ("analytic_mean_at_least: 0.5\n", "must be at least 1.0"),
        ("checklist: mean\n", "unknown checklist rule 'mean'"),
        ("threshold: 3\n", "unknown key 'threshold'"),
        ("weights: {a: -1}\n", "weights.a: must be at least 0.0"),
        ("weights: {a: 1, a: 2}\n", "duplicate key 'a'"),
        ("pass_at_least: 2\n", "unknown key 'pass_at_least'"),
        ("binary_score_at_least: 101\n", "must be at most 100"),
        ("advisory: style\n", "expected a list"),
    ],
)
def test_load_policy_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        load_policy(yaml_source.loads(text, "ci-evals.yaml"))
    assert message in str(info.value)


def test_a_policy_built_directly_normalises_its_ids() -> None:
    policy = ScoringPolicy(weights={"Has_Goals": 2.0}, advisory=frozenset({"Style Nits"}))
    assert policy.weight("has-goals") == 2.0
    assert policy.is_advisory("style-nits")


def test_regrading_a_saved_verdict_under_a_new_policy() -> None:
    raw = [reviewer(crit("a", "checklist", 0), crit("b", "analytic", 3), crit("c", "analytic", 4))]
    lenient = DEFAULT.merge(
        PolicyOverride(advisory=frozenset({"a"}), weights={"b": 2.0}, analytic_threshold=2.0)
    )
    saved = evaluate(raw, lenient)
    assert saved.verdict == "passed"
    # What `ci-evals grade RUN_DIR` will do: the saved results, a new policy.
    again = evaluate(saved.graders, DEFAULT)
    assert again == evaluate(raw, DEFAULT)
    assert again.verdict == "failed"
    assert [(c.advisory, c.weight) for c in again.criteria] == [(False, 1.0)] * 3
