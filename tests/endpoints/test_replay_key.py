"""The replay key: what is normalised away, what is kept, and how a divergence reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.endpoints.replay.key import differences, digest, request_key
from ci_evals.endpoints.replay.recording import load_recording
from ci_evals.endpoints.replay.rewrite import moved
from ci_evals.errors import UserError

RUN_A = "/tmp/ci-evals-20261205T132925Z-449a75-gn72jrrx"
RUN_B = "/var/tmp/ci-evals-20270101T000000Z-abcdef-zz99yy88"


def body(root: str, *, tool_id: str = "toolu_01AbC", prompt: str = "Do stage 4.") -> dict:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "stream": True,
        "metadata": {"user_id": f"user_{tool_id}_session"},
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=9f3a;"},
            {"type": "text", "text": f"cwd: {root}/acme/workspace\nToday's date is 2026-12-05.",
             "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": prompt}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": tool_id, "name": "Write",
                 "input": {"file_path": f"{root}/acme/workspace/out.md"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": "written",
                 "cache_control": {"type": "ephemeral"}}]},
        ],
        "tools": [{"name": "Write", "input_schema": {"type": "object"}}],
    }  # fmt: skip


def test_what_varies_between_runs_is_normalised_away() -> None:
    first = request_key("/v1/messages?beta=true", body(RUN_A))
    other = body(RUN_B, tool_id="toolu_99Zz")
    other["system"][1]["text"] = other["system"][1]["text"].replace("2026-12-05", "2027-01-01")
    other["system"][0]["text"] = "x-anthropic-billing-header: cc_version=2.1; cch=0000;"
    del other["system"][1]["cache_control"]
    second = request_key("/v1/messages", other)
    assert first == second and digest(first) == digest(second)
    assert "metadata" not in first["body"]
    text = json.dumps(first)
    assert "$RUN_TMP/acme/workspace" in text and "toolu#1" in text and "<date>" in text


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda b: b.update(model="claude-opus-4-1"), "body.model"),
        (lambda b: b.update(max_tokens=1000), "body.max_tokens"),
        (lambda b: b.update(stream=False), "body.stream"),
        (lambda b: b["tools"].append({"name": "Read"}), "body.tools"),
        (lambda b: b["messages"][0]["content"][0].update(text="Do stage 5."),
         "body.messages[0].content[0].text"),
        (lambda b: b["system"][1].update(text="another system prompt"), "body.system[1].text"),
    ],
)  # fmt: skip
def test_what_changes_the_answer_is_kept(change, where: str) -> None:  # type: ignore[no-untyped-def]
    changed = body(RUN_A)
    change(changed)
    key, recorded = request_key("/v1/messages", changed), request_key("/v1/messages", body(RUN_A))
    assert digest(key) != digest(recorded)
    assert next(differences(key, recorded))[0] == where


def test_a_difference_names_the_message_and_the_first_changed_character() -> None:
    key = request_key("/v1/messages", body(RUN_A, prompt="Now do stage 4."))
    recorded = request_key("/v1/messages", body(RUN_B))
    assert list(differences(key, recorded)) == [
        (
            "body.messages[0].content[0].text",
            "at character 0: 'Now do stage 4.' != recorded 'Do stage 4.'",
        )
    ]


def test_a_recorded_response_moves_to_this_runs_folder_even_cut_across_deltas() -> None:
    half = len(RUN_A) // 2
    deltas = [f'{{\\"file_path\\": \\"{RUN_A[:half]}', f'{RUN_A[half:]}/acme/out.md\\"}}']
    stream = (
        "".join(
            f'event: content_block_delta\ndata: {{"type":"content_block_delta","index":0,'
            f'"delta":{{"type":"input_json_delta","partial_json":"{d}"}}}}\n\n'
            for d in deltas
        )
        + 'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    served = moved(stream.encode(), True, frozenset({RUN_A}), RUN_B).decode()
    events = [json.loads(line[6:]) for line in served.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["content_block_delta", "message_stop"]
    assert json.loads(events[0]["delta"]["partial_json"]) == {"file_path": f"{RUN_B}/acme/out.md"}
    plain = json.dumps({"content": [{"type": "text", "text": f"wrote {RUN_A}/x"}]}).encode()
    assert RUN_B in moved(plain, False, frozenset({RUN_A}), RUN_B).decode()


def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path: Path) -> None:
    good = {
        "path": "/v1/messages", "request_body": body(RUN_A), "status": 200,
        "response_headers": {"content-type": "application/json"}, "response_body": "{}",
    }  # fmt: skip
    recording = tmp_path / "model-exchanges.jsonl"
    recording.write_text(json.dumps(good) + "\n" + '{"path": "/v1/messages", "request_bo\n')
    with pytest.raises(UserError) as caught:
        load_recording(tmp_path)
    assert caught.value.line == 2 and caught.value.file is not None
    assert caught.value.file.endswith("model-exchanges.jsonl")
    assert "not a recorded exchange: invalid JSON" in caught.value.message
    recording.write_text(json.dumps(good) + "\n")
    assert [e.line for e in load_recording(recording).exchanges] == [1]


def _parallel_results(order: tuple[int, ...], agents: tuple[str, ...], spent: str) -> dict:
    """Three subagents called at once: their results listed as they finished."""
    calls = [{"type": "tool_use", "id": f"toolu_0{i}", "name": "Task", "input": {"n": i}}
             for i in (1, 2, 3)]  # fmt: skip

    def result(i: int) -> dict:
        agent, took = agents[i - 1], 100 + 7 * i * len(spent)
        text = (
            f"report {i}\nagentId: {agent} (use SendMessage with to: '{agent}')\n"
            f"<usage>tool_uses: 2\nduration_ms: {took}</usage>"
        )
        return {"type": "tool_result", "tool_use_id": f"toolu_0{i}",
                "content": [{"type": "text", "text": text}]}  # fmt: skip

    budget = f"USD budget: ${spent}/$2; ${2 - float(spent):.4f} remaining"
    return {
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "user", "content": "Do stage 5."},
            {"role": "assistant", "content": calls},
            {"role": "user", "content": [
                {"type": "text", "text": budget}, *(result(i) for i in order)]},
        ],
    }  # fmt: skip


ZEROS = ("a" + "0" * 16,) * 3


def test_parallel_subagents_finishing_in_another_order_are_the_same_request() -> None:
    # The CLI lists parallel tool results as they finish, names each subagent with a
    # random id, appends how long it took, and reminds the model what the stage spent
    # so far: all timing, none of it the model's doing (measured on labsmith stage 5).
    first = request_key("/v1/messages", _parallel_results((1, 2, 3), ZEROS, "0.05"))
    agents = ("a1b2c3d4e5f607189", "a" + "f" * 16, "a" + "9" * 16)
    other = _parallel_results((3, 1, 2), agents, "0.071")
    assert request_key("/v1/messages", other) == first
    results = first["body"]["messages"][2]["content"]
    assert [b.get("tool_use_id") for b in results] == [None, "toolu#1", "toolu#2", "toolu#3"]
    # ... while what the model wrote or was asked is kept: another report differs.
    changed = _parallel_results((1, 2, 3), ZEROS, "0.05")
    changed["messages"][2]["content"][2]["content"][0]["text"] = "report 9"
    assert request_key("/v1/messages", changed) != first
    capped = _parallel_results((1, 2, 3), ZEROS, "0.05")
    capped["messages"][2]["content"][0]["text"] = "USD budget: $0.05/$5; $4.95 remaining"
    assert request_key("/v1/messages", capped) != first  # the cap is kept
