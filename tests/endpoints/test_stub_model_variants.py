"""Stub additions for grading tests: per-conversation `variants`, and `fault.scope`."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals.endpoints.base import EndpointOptions
from ci_evals.endpoints.stub import StubEndpoint
from ci_evals.endpoints.stub_model import loads_script
from ci_evals.endpoints.stub_model.request import ParsedRequest
from ci_evals.endpoints.stub_model.responder import Responder
from ci_evals.errors import UserError

SCRIPT = """rules:
  - name: review
    match: {prompt_contains: review}
    variants:
      - [{text: "five"}]
      - [{text: "three"}, {text: "three again"}]
  - name: flaky
    match: {prompt_contains: flaky}
    turns:
      - {fault: {http_status: 529, times: 1, scope: server}, text: "ok"}
  - name: per-session
    match: {prompt_contains: session}
    turns:
      - {fault: {http_status: 500, times: 1}, text: "ok"}
"""


def request(prompt: str, session: str, turns: int = 0) -> ParsedRequest:
    return ParsedRequest(
        model="m", cwd="/w", prompt=prompt, command=None, args="", system="",
        subagent=False, session_id=session, assistant_turns=turns, has_tools=True,
        stream=True, output_format=None,
    )  # fmt: skip


def texts(responder: Responder, req: ParsedRequest) -> str:
    reply = responder.reply(req)
    return reply.outcome if reply.fault else reply.blocks[0]["text"]


def test_each_new_conversation_takes_the_next_variant_cycling() -> None:
    responder = Responder(loads_script(SCRIPT))
    assert texts(responder, request("review", "a")) == "five"
    assert texts(responder, request("review", "b")) == "three"
    # A conversation keeps its variant for every turn, and on a repeated request.
    assert texts(responder, request("review", "b", turns=1)) == "three again"
    assert texts(responder, request("review", "a")) == "five"
    assert texts(responder, request("review", "c")) == "five"  # cycled


def test_a_server_scoped_fault_spans_sessions_a_session_scoped_one_does_not() -> None:
    responder = Responder(loads_script(SCRIPT))
    assert texts(responder, request("flaky", "first")) == "fault"
    assert texts(responder, request("flaky", "second")) == "ok"  # a new CLI process recovers
    assert texts(responder, request("session", "first")) == "fault"
    assert texts(responder, request("session", "second")) == "fault"  # counted per session
    assert texts(responder, request("session", "second")) == "ok"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules:\n  - turns: [{text: a}]\n    variants: [[{text: b}]]\n", "not both"),
        ("rules:\n  - variants: []\n", "empty"),
        ("rules:\n  - turns: [{fault: {http_status: 529, scope: server}}]\n", "give 'times' too"),
        (
            "rules:\n  - turns: [{fault: {http_status: 529, times: 1, scope: run}}]\n",
            "unknown scope",
        ),
    ],
)
def test_mistakes_are_load_errors(text: str, message: str) -> None:
    with pytest.raises(UserError) as caught:
        loads_script(text, "stub.yaml")
    assert message in str(caught.value)


def test_a_run_on_a_script_with_variants_names_them(tmp_path: Path) -> None:
    """The quickstart run twice shows other reviewer scores: the endpoint the run
    opens says which rules rotate, for the run to print under its table."""
    script = tmp_path / "stub.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    with StubEndpoint(script).open({}, EndpointOptions()) as opened:
        assert opened.notes == (
            "stub: the rule 'review' (2) rotates its variants by the unit's place in the "
            "plan: what they answer, and so the scores, change between repeats and scenarios "
            "by design, the same in every run and every split into shards "
            "(docs/stub-model.md, Variants)",
        )
    plain = tmp_path / "plain.yaml"
    plain.write_text("rules:\n  - name: a\n    turns: [{text: hi}]\n", encoding="utf-8")
    with StubEndpoint(plain).open({}, EndpointOptions()) as opened:
        assert opened.notes == ()
