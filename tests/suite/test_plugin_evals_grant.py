"""The operator's tool grant (`plugin_evals.allow_tools`, `run --allow-tools`) as the
bundled `claude plugin eval` applies it: the same tools offered to the model, the
same refusal of an ungranted Write (a tool error the model reads), the same scores.

One plugin of our own, one stub script, one stub model server recording every
request (the model's side: what it was offered and what each call returned); the
real CLI offline, and `ci-evals run` with the real SDK in its sandbox, each
without a grant and with `Write`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ci_evals.endpoints.stub_model import StubServer, load_script
from tests.run_helpers import plugin_eval, run_ci_evals

pytestmark = pytest.mark.slow

FILES = {
    "p/.claude-plugin/plugin.json": '{"name": "p", "version": "0.1.0"}\n',
    "p/skills/greet/SKILL.md": "---\nname: greet\ndescription: Greets\n---\nGreet them.\n",
    # `allowed_tools` names Write: it neither grants it (the operator does) nor narrows.
    "p/evals/note/prompt.md": (
        "---\nruns: 1\nmax_turns: 6\nallowed_tools: [Write, Read]\n---\nWrite a note.\n"
    ),
    "p/evals/note/graders/no-file.md": ("---\ntype: file_exists\npath: '**'\nexists: false\n---\n"),
    # Counts attempts, refused ones included (the CLI's own rule), so it passes in both.
    "p/evals/note/graders/tried.md": "---\ntype: tool_used\ntool: Write\n---\n",
    "p/evals/note/graders/said.md": "---\ntype: regex\n---\nDone\n",
}
STUB = """\
rules:
  - name: note
    match: {prompt_contains: "Write a note"}
    turns:
      - tools:
          - write: {path: note.txt, content: "a note\\n"}
      - tools:
          - bash: "echo hi > shell.txt"
      - text: "Done."
"""
REFUSED = "No such tool available: {tool}. {tool} is disabled for this session"


def _repo(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "stub.yaml").write_text(STUB)
    (tmp_path / "ci-evals.yaml").write_text("version: 1\nplugin: p\nplugin_evals: {}\n")
    return tmp_path


def _exchanges(path: Path) -> list[dict[str, Any]]:
    """The agent's requests (the stub's record), in order."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        line["request_body"]
        for line in lines
        if isinstance(line.get("request_body"), dict) and "Write a note" in json.dumps(line)
    ]


def _system_text(body: dict[str, Any]) -> str:
    """What the CLI tells the model outside the conversation: the system prompt and
    its `system` messages (the deferred tools are listed there)."""
    parts = [body.get("system", "")]
    parts += [m["content"] for m in body["messages"] if m["role"] == "system"]
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        else:
            texts += [block.get("text", "") for block in part if isinstance(block, dict)]
    return "\n".join(texts)


def _seen(bodies: list[dict[str, Any]]) -> tuple[list[str], dict[str, str]]:
    """The tools the model was offered (those it may load with ToolSearch marked
    `deferred:`), and what each of its calls returned."""
    offered = sorted(t["name"] for t in bodies[0].get("tools", []))
    listed = re.search(r"via ToolSearch[^\n]*:\n((?:\S+\n)+)", _system_text(bodies[0]))
    assert listed is not None, "no deferred tools listed"
    offered += [f"deferred:{name}" for name in listed.group(1).split()]
    calls: dict[str, str] = {}
    last = bodies[-1]["messages"]
    names = {
        block["id"]: block["name"]
        for message in last
        if message["role"] == "assistant" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    }
    for message in last:
        if message["role"] != "user" or not isinstance(message["content"], list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_result":
                text = block["content"]
                if isinstance(text, list):
                    text = " ".join(part.get("text", "") for part in text)
                mark = "error: " if block.get("is_error") else "ok: "
                calls[names[block["tool_use_id"]]] = mark + text
    return offered, calls


def _cli(repo: Path, name: str, *flags: str) -> tuple[float, list[dict[str, Any]]]:
    record = repo / f"{name}.jsonl"
    out = repo / f"{name}.json"
    with StubServer(load_script(repo / "stub.yaml"), record_path=record) as server:
        done = plugin_eval(
            repo / "p", repo / f"home-{name}", server.url, "--json", str(out), *flags
        )
    assert out.is_file(), done.stdout + done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    assert case["arms"]["with"][0]["error"] is None, case
    return case["aggregates"]["score"], _exchanges(record)


def _ours(repo: Path, name: str, *flags: str) -> tuple[float, list[dict[str, Any]], str]:
    argv = ["run", "--model", "stub:stub.yaml", "--out", name, "--record", *flags]
    done = run_ci_evals(repo, *argv)
    results = repo / name / "results.json"
    assert results.is_file(), done.stdout + done.stderr
    (summary,) = json.loads(results.read_text())["summaries"]
    score = summary["summary"]["binary_score"]["mean"] / 100
    return score, _exchanges(repo / name / "model-exchanges.jsonl"), done.stderr


def test_an_ungranted_write_is_refused_to_the_model_as_by_the_cli(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    theirs, their_requests = _cli(repo, "cli-none")
    ours, our_requests, said = _ours(repo, "ours-none")
    # No file written, in both: `no-file` passes, and so does `tried` (a refused call counts).
    assert theirs == ours == 1.0
    their_offer, their_calls = _seen(their_requests)
    our_offer, our_calls = _seen(our_requests)
    assert their_offer == our_offer
    assert "Write" not in our_offer and {"Read", "Glob", "Grep", "Skill"} <= set(our_offer)
    assert "deferred:TaskStop" in our_offer and "deferred:TaskCreate" not in our_offer
    for tool in ("Write", "Bash"):
        assert REFUSED.format(tool=tool) in their_calls[tool]
        assert REFUSED.format(tool=tool) in our_calls[tool]
        assert our_calls[tool].startswith("error: ")
    assert not list((repo / "ours-none").glob("note/**/after/note.txt"))
    # The CLI's lines about the grant, as warnings before the run.
    assert "note: not granted (missing --allow-tools grant, or a malformed entry): Write" in said


def test_a_granted_write_is_offered_in_every_case_and_writes(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    theirs, their_requests = _cli(repo, "cli-write", "--allow-tools", "Write")
    ours, our_requests, said = _ours(repo, "ours-write", "--allow-tools", "Write")
    # The file is written in both: `no-file` fails (2 of 3 graders pass).
    assert theirs == pytest.approx(ours) == pytest.approx(2 / 3)
    their_offer, their_calls = _seen(their_requests)
    our_offer, our_calls = _seen(our_requests)
    assert their_offer == our_offer
    assert {"Write", "Edit"} <= set(our_offer) and "Bash" not in our_offer
    assert their_calls["Write"].startswith("ok: ") and our_calls["Write"].startswith("ok: ")
    assert REFUSED.format(tool="Bash") in our_calls["Bash"]
    assert "not granted" not in said
