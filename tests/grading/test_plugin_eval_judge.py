"""`llm` and `baseline` graders of `claude plugin eval` cases: the CLI's prompts, votes and
cut, asked over real HTTP.

The prompts are compared with the text the bundled CLI sent (captured from its
judge requests to a local server). Grading runs against two real HTTP servers:
a scripted Messages API written here (one answer per request, in order, every
request body kept) for the vote rules, and the stub model for what a suite's
stub script does. ci-evals' differences are checked too: an answer that is
neither PASS nor FAIL, an endpoint error, or no endpoint at all is an error.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ci_evals.config.yaml_source import loads
from ci_evals.endpoints.stub_model import StubServer, loads_script
from ci_evals.grading.kinds import plugin_eval_judge as judge
from ci_evals.grading.kinds.base import GradeContext, ModelEndpoint
from ci_evals.grading.kinds.plugin_eval import (
    JUDGE_FILE,
    Baseline,
    Llm,
    PluginEvalGrader,
    load_grader,
)

# What the bundled CLI (2.1.337) sent for `criteria: "The agent greets Alex."` on
# the final message "Hi Alex!", and the start of its baseline prompt.
CLI_LLM_PROMPT = (
    "You are grading the output of a coding agent against a criterion.\n\nCriterion:\n"
    "The agent greets Alex.\n\n\nAgent output (last_message):\nHi Alex!\n\n\n"
    "Respond with exactly one word: PASS or FAIL."
)
CLI_BASELINE_START = (
    "You are comparing a NEW coding-agent trajectory against a BASELINE.\n\nCriterion:\n"
    "Greets as politely.\n\n\nBASELINE trajectory:\n"
    '{"type":"assistant","message":{"content":[{"type":"text","text":"Hello Alex"}]}}'
    "\n\n\nNEW trajectory:\n"
)
CLI_BASELINE_END = (
    "\n\n\nDoes the NEW trajectory satisfy the criterion at least as well as the BASELINE?"
    "\n\nRespond with exactly one word: PASS or FAIL."
)


def test_the_prompts_are_the_clis() -> None:
    prompt, evidence = judge.llm_prompt("The agent greets Alex.", "last_message", "Hi Alex!")
    assert (prompt, evidence) == (CLI_LLM_PROMPT, "Hi Alex!")
    base = ['{"type":"assistant","message":{"content":[{"type":"text","text":"Hello Alex"}]}}']
    whole = judge.baseline_prompt("Greets as politely.", base, ['{"a":1}'])
    assert whole == CLI_BASELINE_START + '{"a":1}' + CLI_BASELINE_END


def test_long_text_is_cut_in_the_middle_as_javascript_counts_it() -> None:
    assert judge.middle_cut("a" * 100_000) == "a" * 100_000
    cut = judge.middle_cut("a" * 79_999 + "\U0001f600" + "b" * 40_000)
    # The emoji is two UTF-16 units across the head's end: the head stops before it.
    head, marker, tail = cut.split("\n")
    assert head == "a" * 79_999
    assert marker == "[\u202620002 chars elided\u2026]"
    assert tail == "b" * 20_000


def test_a_long_trajectory_is_its_first_and_last_twelve_messages() -> None:
    lines = [str(i) for i in range(25)]
    assert judge.messages_text(lines[:24]) == "\n".join(lines[:24])
    shown = judge.messages_text(lines).split("\n")
    assert shown == [*lines[:12], "[\u20261 messages elided\u2026]", *lines[13:]]


@pytest.mark.parametrize(
    ("answer", "vote"),
    [
        ("PASS", True),
        ("pass.", True),
        ("**Pass**", True),
        ("FAIL", False),
        ("Fail - it never greets", False),
        ("PASSED", None),  # no word boundary after PASS
        ("PASS or FAIL", None),
        ("I cannot tell", None),
        ("", None),
        ("PA\u017f\u017f", None),  # JavaScript's /i without u does not fold U+017F to s
    ],
)
def test_a_vote_is_pass_or_fail_alone(answer: str, vote: bool | None) -> None:
    assert judge.read_vote(answer) is vote


# -- grading over HTTP --------------------------------------------------------------


class _Messages:
    """A scripted Messages API on 127.0.0.1: answers in order (an int is an HTTP status)."""

    def __init__(self, answers: list[str | int]) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                owner.bodies.append(json.loads(body))
                owner.headers.append({k.lower(): v for k, v in self.headers.items()})
                answer = owner.answers.pop(0)
                if isinstance(answer, int):
                    status, reply = answer, {"type": "error", "error": {"message": "overloaded"}}
                else:
                    status = 200
                    reply = {
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-haiku-4-5",
                        "content": [{"type": "text", "text": answer}],
                        "usage": {"input_tokens": 1000, "output_tokens": 10},
                    }
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> _Messages:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stage(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """A stage's files (greeting.txt), its trajectory and its folder in the run."""
    folder, out = tmp_path / "after", tmp_path / "stage"
    folder.mkdir()
    out.mkdir()
    (folder / "greeting.txt").write_text("\ufeffHello, Alex!\n")
    trajectory = tmp_path / "trajectory.jsonl"
    records = [
        {"type": "AssistantMessage", "content": [{"text": "Hi Alex!"}], "model": "m"},
        {"type": "ResultMessage", "total_cost_usd": 1.0, "ratio": 1.5e-5},
    ]
    trajectory.write_text("".join(json.dumps(r) + "\n" for r in records))
    # The CLI's stdout beside it: what `trace` is (the SDK's frames left out).
    (tmp_path / "stream.jsonl").write_text(
        '{"type":"control_response","response":{}}\n'
        '{"type":"system","subtype":"session_state_changed","sdk_host_only":true}\n'
        '{"type":"system","subtype":"init","cwd":"/w"}\n'
        "not json\n"
        '{"type":"assistant","message":{"content":[{"type":"text","text":"Hi Alex!"}]}}\n'
        '{"type":"result","subtype":"success","total_cost_usd":1.0,"ratio":1.5e-5}\n'
    )
    yield folder, trajectory, out


def _grade(
    graders: tuple[Llm | Baseline, ...],
    stage: tuple[Path, Path, Path],
    endpoint: ModelEndpoint | None,
) -> Any:
    folder, trajectory, out = stage
    grader = PluginEvalGrader(graders, judge_model="claude-haiku-4-5")
    return grader.grade(GradeContext(folder, trajectory, out_dir=out, endpoint=endpoint))


def _endpoint(url: str, budget: float | None = None) -> ModelEndpoint:
    return ModelEndpoint({"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "run-token"}, budget)


def test_two_pass_votes_of_three_pass_and_the_votes_are_kept(
    stage: tuple[Path, Path, Path],
) -> None:
    graders = (
        Llm("greets", 2.0, "The agent greets Alex."),
        Llm("file", 1.0, "Says hello", focus="files"),
    )
    with _Messages(["PASS", "FAIL", "pass", "FAIL", "FAIL", "PASS"]) as api:
        result = _grade(graders, stage, _endpoint(api.url))
    assert result.error is None
    assert [(c.id, c.passed, c.detail) for c in result.criteria] == [
        ("greets", True, "judge votes: PASS FAIL PASS"),
        ("file", False, "judge votes: FAIL FAIL PASS"),
    ]
    # The request: the CLI's system prompt and user text, the judge model, no tools.
    body = api.bodies[0]
    assert body["model"] == "claude-haiku-4-5" and body["system"] == judge.SYSTEM
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": CLI_LLM_PROMPT}]}
    ]
    assert "tools" not in body and "stream" not in body and body["max_tokens"] == judge.MAX_TOKENS
    assert api.headers[0]["x-api-key"] == "run-token"
    files_prompt = api.bodies[3]["messages"][0]["content"][0]["text"]
    assert "Agent output (files):\ngreeting.txt\n" in files_prompt
    # Six requests at haiku-4-5's price: 1000 in, 10 out each.
    assert result.cost_usd == pytest.approx(6 * (1000 * 1.0 + 10 * 5.0) / 1e6)
    assert result.judge_model == "claude-haiku-4-5"
    saved = json.loads((stage[2] / JUDGE_FILE).read_text())
    assert saved["graders"][0] == {
        "name": "greets",
        "type": "llm",
        "judgeVotes": [True, False, True],
        "answers": ["PASS", "FAIL", "pass"],
        "evidence": "Hi Alex!",
        "passed": True,
    }
    assert result.raw_output.path == str(stage[2] / JUDGE_FILE)
    assert result.raw_output.size == (stage[2] / JUDGE_FILE).stat().st_size


@pytest.mark.parametrize(
    ("answers", "says"),
    [
        (["PASS", "maybe"], 'vote 2: the judge answered "maybe", neither PASS nor FAIL'),
        (["PASS or FAIL"], 'vote 1: the judge answered "PASS or FAIL"'),
        (["PASS", 529], "vote 2: the endpoint answered HTTP 529: overloaded"),
    ],
)
def test_a_vote_that_is_no_verdict_makes_the_grader_an_error(
    stage: tuple[Path, Path, Path], answers: list[str | int], says: str
) -> None:
    with _Messages(answers) as api:
        result = _grade((Llm("greets", 1.0, "Greets."),), stage, _endpoint(api.url))
    assert result.criteria == () and result.error is not None
    assert result.error.startswith("greets: judge: " + says), result.error
    assert len(api.bodies) == len(answers)  # no vote asked after the first that failed
    saved = json.loads((stage[2] / JUDGE_FILE).read_text())["graders"][0]
    assert saved["answers"] == [a for a in answers if isinstance(a, str)]


def test_no_endpoint_or_no_budget_is_an_error(stage: tuple[Path, Path, Path]) -> None:
    result = _grade((Llm("greets", 1.0, "Greets."),), stage, None)
    assert result.error == "greets: no model endpoint to judge with (`run` and `grade` have one)"
    with _Messages([]) as api:
        result = _grade((Llm("greets", 1.0, "Greets."),), stage, _endpoint(api.url, 0.0))
    assert result.error is not None and "the run budget is spent" in result.error
    assert api.bodies == []


def test_a_file_focus_is_read_as_the_cli_reads_it(stage: tuple[Path, Path, Path]) -> None:
    """The BOM dropped; a missing file fails (the CLI's thrown grader); an image is
    an error (not supported yet); a long file gets the CLI's note."""
    folder = stage[0]
    (folder / "long.md").write_text("x" * 9000)
    (folder / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n....")
    graders = (
        Llm("content", 1.0, "Says hello", focus=_file("greeting.txt")),
        Llm("missing", 1.0, "Exists", focus=_file("nope.txt")),
        Llm("long", 1.0, "Long", focus=_file("long.md")),
    )
    with _Messages(["PASS"] * 6) as api:
        result = _grade(graders, stage, _endpoint(api.url))
    text = api.bodies[0]["messages"][0]["content"][0]["text"]
    assert "Agent output (file greeting.txt):\nHello, Alex!\n\n\n\nRespond" in text
    details = [c.detail for c in result.criteria]
    assert details[1] == 'grader threw: file nope.txt: path "nope.txt" does not exist'
    assert details[2] == (
        "judge votes: PASS PASS PASS \u2014 note: long file (9000 chars); llm judges are "
        "noisy on long inputs, prefer a regex grader for large artifacts"
    )
    with _Messages([]) as api:
        picture = Llm("pic", 1.0, "Shows", focus=_file("pic.png"))
        result = _grade((picture,), stage, _endpoint(api.url))
    assert result.error is not None and "is an image (image/png)" in result.error


def _file(path: str) -> Any:
    from ci_evals.grading.kinds.plugin_eval import FileTarget  # noqa: PLC0415

    return FileTarget(path)


def test_a_baseline_is_read_at_load_and_shown_as_javascript_writes_it(
    tmp_path: Path, stage: tuple[Path, Path, Path]
) -> None:
    case = tmp_path / "case"
    case.mkdir()
    (case / "base.jsonl").write_text('{"type": "assistant", "n": 2.0}\n\n{"b": 1e-7}\n')
    item = loads("{type: baseline, name: b, baseline_file: base.jsonl, criteria: C}", "case.yaml")
    grader = load_grader(item, folder=case)
    assert isinstance(grader, Baseline)
    assert grader.baseline == ('{"type":"assistant","n":2}', '{"b":1e-7}')
    with _Messages(["PASS"] * 3) as api:
        result = _grade((grader,), stage, _endpoint(api.url))
    assert result.criteria[0].passed
    text = api.bodies[0]["messages"][0]["content"][0]["text"]
    assert text.endswith(
        '\nNEW trajectory:\n{"type":"system","subtype":"init","cwd":"/w"}\n'
        '{"type":"assistant","message":{"content":[{"type":"text","text":"Hi Alex!"}]}}\n'
        '{"type":"result","subtype":"success","total_cost_usd":1,"ratio":0.000015}'
        + CLI_BASELINE_END
    )  # the CLI's lines as JSON.stringify writes them, the SDK's frame left out


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("{type: baseline, name: b, baseline_file: none.jsonl, criteria: C}", "does not exist"),
        ("{type: baseline, name: b, baseline_file: bad.jsonl, criteria: C}", "line 2: not JSON"),
        ("{type: baseline, name: b, baseline_file: ../out.jsonl, criteria: C}", "leads out"),
        ("{type: baseline, name: b, criteria: C}", "missing required key 'baseline_file'"),
        ("{type: llm, name: j}", "missing required key 'criteria'"),
        ("{type: llm, name: j, criteria: C, focus: mocks}", "unknown target 'mocks'"),
    ],
)
def test_a_judge_that_can_never_pass_is_refused_at_load(
    tmp_path: Path, written: str, says: str
) -> None:
    from ci_evals.errors import UserError  # noqa: PLC0415

    case = tmp_path / "case"
    case.mkdir()
    (case / "bad.jsonl").write_text('{"a": 1}\nnot json\n')
    (tmp_path / "out.jsonl").write_text("{}\n")
    with pytest.raises(UserError) as caught:
        load_grader(loads(written, "case.yaml"), folder=case)
    assert says in str(caught.value) and "case.yaml:1:" in str(caught.value)


def test_the_stub_model_answers_a_judge_by_its_system_prompt(
    stage: tuple[Path, Path, Path],
) -> None:
    script = loads_script(
        """\
rules:
  - name: judge-greets
    match: {system_contains: "evaluation judge", prompt_contains: "greets Alex"}
    turns:
      - text: "PASS"
""",
        "stub.yaml",
    )
    with StubServer(script) as server:
        caller = server.new_caller()
        result = _grade(
            (Llm("greets", 1.0, "The agent greets Alex."), Llm("other", 1.0, "Other")),
            stage,
            ModelEndpoint(caller.env),
        )
        misses = caller.misses()
    # The first judge answered three times; the second matched no rule: the stub's
    # "no rule matched" text is no verdict (an error), and a miss of the stage.
    assert result.error is not None and result.error.startswith("other: judge: vote 1:")
    saved = json.loads((stage[2] / JUDGE_FILE).read_text())["graders"]
    assert saved[0]["judgeVotes"] == [True, True, True]
    assert len(misses) == 1


def test_a_trace_cut_at_its_cap_is_an_error(stage: tuple[Path, Path, Path]) -> None:
    from ci_evals.agents import STREAM_CUT  # noqa: PLC0415
    from ci_evals.grading.kinds.js_regex import compile_js  # noqa: PLC0415
    from ci_evals.grading.kinds.plugin_eval import Regex  # noqa: PLC0415

    stream = stage[1].parent / "stream.jsonl"
    grader = PluginEvalGrader((Regex("t", 1.0, compile_js('"type":"system"', ""), "trace"),))
    ctx = GradeContext(stage[0], stage[1], out_dir=stage[2])
    assert grader.grade(ctx).criteria[0].passed
    stream.write_text(stream.read_text() + STREAM_CUT)
    assert "the trace was cut" in (grader.grade(ctx).error or "")
    stream.unlink()
    assert "stream.jsonl" in (grader.grade(ctx).error or "")
