"""Issue 32's "Done when": one case suite using everything, run by the bundled
`claude plugin eval --ablation with-without` and by `ci-evals run` with
`ablation: with-without` against one stub model, gives the same per-case scores
with and without the plugin and the same delta, except the documented fail-closed
differences, which are asserted by name.

The plugin, `helpdesk`, has a skill, a command and two MCP servers in `.mcp.json`
(`tracker`: fixed and error mocks; `wiki`: an agent mock with an adopted
`.replay/` recording). Its suite uses every grader type and target, weights,
`runs: 2`, a scaffold, `arm:` and the implicit with-only rules, and tags (one case
filtered out). The stub answers each arm by whether the plugin's skill is listed
(`context_contains`); a rule without it is the without-plugin answer. Each part
has its own deeper parity test (test_plugin_evals_parity, _mocks_parity,
_context, _ablation, _grant): this one checks they hold together. Last, the same
suite under change selection (`compute-stage --json`), which needs no model.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from ci_evals.endpoints.stub_model import StubServer, load_script
from ci_evals.main import main
from ci_evals.workspace.mock_server import recording_key
from tests.case_units_repo import commit
from tests.conftest import git
from tests.run_helpers import plugin_eval, run_ci_evals, write_files

TRACKER = "mcp__plugin_helpdesk_tracker"
WIKI_SERVER = (
    "---\ntype: agent\ntools: [search]\n---\nThe product wiki: pages about login and billing.\n"
)
WIKI_CALL = {"q": "login"}

PLUGIN_FILES = {
    ".claude-plugin/plugin.json": '{"name": "helpdesk", "version": "0.1.0"}\n',
    "skills/greet/SKILL.md": (
        "---\nname: greet\ndescription: Greets a customer the helpdesk way\n---\n"
        "Say 'Hello, NAME! (helpdesk)'.\n"
    ),
    "commands/triage.md": "---\ndescription: Triage a ticket\n---\nTriage $ARGUMENTS.\n",
    ".mcp.json": json.dumps(
        {"mcpServers": {"tracker": {"command": "false"}, "wiki": {"command": "false"}}}
    ),
    # Every case below the eval folder's mocks/ is a case with mocks: its
    # `mock_calls` graders without `arm` are with-only.
    "evals/mocks/tracker/get_ticket.md": '{"id": "{{input.id}}", "title": "Login fails"}\n',
    "evals/mocks/tracker/close.md": "---\nerror: true\n---\nclosing is not allowed\n",
    "evals/mocks/wiki/_server.md": WIKI_SERVER,
    # The fixed and error mocks, the scaffold, and every target but trace.
    "evals/ticket/case.yaml": f"""\
schema_version: "1.1"
name: ticket
runs: 1
tags: [core]
context:
  scaffold_script: seed.sh
execution:
  prompt: "Look up ticket T-12, close it and write report.md."
  max_turns: 8
graders:
  - {{type: regex, name: one-ok, target: mock_calls, pattern: '"verdict":"ok"', match: "count:1"}}
  - {{type: regex, name: close-refused, target: mock_calls, pattern: '"isError":true', arm: both}}
  - {{type: llm, name: judged-calls, focus: mock_calls, criteria: "The lookup said Login fails."}}
  - {{type: tool_used, name: looked-up, tool: {TRACKER}__get_ticket, input_match: "T-12"}}
  - {{type: tool_used, name: one-write, tool: Write, min: 1, max: 1}}
  - {{type: tool_order, name: in-order, before: {TRACKER}__get_ticket, after: {TRACKER}__close}}
  - {{type: file_exists, name: reported, path: report.md, weight: 2}}
  - {{type: file_exists, name: seed-not-created, path: seed.txt, exists: false}}
  - {{type: regex, name: seeded, target: {{source: file, path: seed.txt}}, pattern: "seeded"}}
  - {{type: regex, name: report-listed, target: files, pattern: 'report\\.md'}}
  - {{type: regex, name: no-sorry, pattern: "sorry", match: not_contains, flags: i}}
""",
    "evals/ticket/seed.sh": "echo 'seeded by the scaffold' > seed.txt\n",
    # The skill (with-only graders explicit and implicit, `arm: both`), the trace,
    # both judges, and `runs: 2`.
    "evals/greet/prompt.md": "---\nruns: 2\ntags: [core]\n---\nGreet Alex.\n",
    "evals/greet/graders/says-hello.md": "---\ntype: regex\n---\nHello, Alex!\n",
    "evals/greet/graders/used-skill.md": "---\ntype: tool_used\ntool: Skill\n---\n",
    "evals/greet/graders/signed.md": "---\ntype: regex\narm: with-only\n---\n\\(helpdesk\\)\n",
    "evals/greet/graders/no-bash.md": (
        "---\ntype: tool_used\ntool: Bash\nmin: 0\nmax: 0\narm: both\n---\n"
    ),
    "evals/greet/graders/skill-in-trace.md": (
        '---\ntype: regex\ntarget: trace\n---\n"name":"Skill"\n'
    ),
    "evals/greet/graders/polite.md": "---\ntype: llm\n---\nThe reply greets Alex politely.\n",
    "evals/greet/graders/warm.md": (
        "---\ntype: baseline\nbaseline_file: baseline.jsonl\n---\nGreets Alex as warmly.\n"
    ),
    "evals/greet/baseline.jsonl": (
        '{"type":"assistant","message":{"content":[{"type":"text","text":"Hi Alex."}]}}\n'
    ),
    # The agent mock, answered by its adopted recording (the stub would say otherwise).
    "evals/wiki/prompt.md": "---\nruns: 1\ntags: [core]\n---\nFind the wiki page about login.\n",
    "evals/wiki/graders/found.md": (
        "---\ntype: regex\ntarget: mock_calls\narm: both\n---\nLogin troubleshooting\n"
    ),
    "evals/wiki/graders/told.md": "---\ntype: regex\n---\nSee the page\n",
    # The documented fail-closed difference: a judge that answers neither PASS nor
    # FAIL is a FAIL vote to the CLI and an `error` to ci-evals.
    "evals/vague/prompt.md": "---\nruns: 1\ntags: [core]\n---\nSay you are done.\n",
    "evals/vague/graders/done.md": "---\ntype: regex\n---\nDone\n",
    "evals/vague/graders/concise.md": "---\ntype: llm\n---\nThe reply is concise.\n",
    # Left out by the tag filter in both.
    "evals/other/prompt.md": "---\ntags: [slow]\n---\nNot selected.\n",
    "evals/other/graders/any.md": "---\ntype: regex\n---\nx\n",
}

SELECT = f"select:{TRACKER}__get_ticket,{TRACKER}__close"
WIKI_SELECT = "select:mcp__plugin_helpdesk_wiki__search"
WITH = 'context_contains: "helpdesk:greet"'  # only the with-arm's requests list the skill
STUB = f"""\
rules:
  # Judges and the wiki's agent mock first: their prompts quote the agent's words.
  - name: wiki-mock  # never asked: the adopted recording answers
    match: {{system_contains: 'standing in for the MCP server "wiki"'}}
    turns: [{{text: "Page: nothing found"}}]
  - name: judge-vague
    match: {{system_contains: "evaluation judge", prompt_contains: "is concise"}}
    turns: [{{text: "PASS or FAIL"}}]
  - name: judge-pass
    match: {{system_contains: "evaluation judge"}}
    turns: [{{text: "PASS"}}]
  # With the plugin.
  - name: ticket-with
    match: {{prompt_contains: "ticket T-12", {WITH}}}
    turns:
      - tools: [{{tool: {{name: ToolSearch, input: {{query: "{SELECT}", max_results: 5}}}}}}]
      - tools: [{{tool: {{name: {TRACKER}__get_ticket, input: {{id: T-12}}}}}}]
      - tools: [{{tool: {{name: {TRACKER}__close, input: {{id: T-12}}}}}}]
      - tools: [{{write: {{path: report.md, content: "T-12: Login fails\\n"}}}}]
      - text: "Ticket T-12: Login fails. It could not be closed."
  - name: greet-with
    match: {{prompt_contains: "Greet Alex", {WITH}}}
    turns:
      - tools: [{{skill: "helpdesk:greet"}}]
      - text: "Hello, Alex! (helpdesk)"
  - name: wiki-with
    match: {{prompt_contains: "wiki page", {WITH}}}
    turns:
      - tools: [{{tool: {{name: ToolSearch, input: {{query: "{WIKI_SELECT}", max_results: 5}}}}}}]
      - tools: [{{tool: {{name: mcp__plugin_helpdesk_wiki__search, input: {{q: login}}}}}}]
      - text: "See the page."
  # Without it (and `vague`, alike in both arms).
  - name: ticket-without
    match: {{prompt_contains: "ticket T-12"}}
    turns: [{{text: "I have no ticket tracker."}}]
  - name: greet-without
    match: {{prompt_contains: "Greet Alex"}}
    turns: [{{text: "Hi Alex."}}]
  - name: wiki-without
    match: {{prompt_contains: "wiki page"}}
    turns: [{{text: "I have no wiki."}}]
  - name: vague
    match: {{prompt_contains: "you are done"}}
    turns: [{{text: "Done."}}]
"""

# case -> (score with, score without, delta), as both tools give them.
EXPECTED = {
    # 10 scored weights (reported: 2): all pass with; without, only the scaffold's
    # and the negative graders (seed-not-created, seeded, no-sorry).
    "ticket": (1.0, 0.3, 0.7),
    # 5 scored (used-skill, signed: with-only); without: no-bash and the judges.
    "greet": (1.0, 0.6, 0.4),
    # found: the pinned answer in the calls (`arm: both`; the stub would say otherwise).
    "wiki": (1.0, 0.0, 1.0),
}
# The CLI's `vague`: `done` passes, the judge's three votes are FAILs.
CLI_VAGUE = (0.5, 0.5, 0.0)


def _flat(scores: dict[str, tuple[float, float, float]]) -> dict[tuple[str, int], float]:
    """pytest.approx compares flat mappings only."""
    return {(case, i): value for case, three in scores.items() for i, value in enumerate(three)}


# The wiki's answer as the CLI records it (`{input, output, verdict, recordedAt, model}`).
RECORDING = {
    "input": WIKI_CALL,
    "output": "Page: Login troubleshooting (wiki/login)",
    "verdict": "ok",
    "recordedAt": "2026-01-01T00:00:00.000Z",
    "model": "claude-haiku-5-5",
}


def _pin_wiki_recording(plugin: Path, recording: dict[str, Any]) -> str:
    """Adopt `recording` into `mocks/.replay/`, named by the CLI's recording key (the
    mock's source hash, its description, the call, no earlier calls)."""
    source_hash = hashlib.sha256(WIKI_SERVER.encode()).hexdigest()[:16]
    description = "The product wiki: pages about login and billing."
    key = recording_key("wiki", "search", WIKI_CALL, source_hash, description, [])
    name = f"search-{key}.json"
    write_files(plugin / "evals" / "mocks" / ".replay" / "wiki", {name: json.dumps(recording)})
    return name


def _cli(plugin: Path, stub: Path, scratch: Path, *select: str) -> tuple[int, dict[str, Any]]:
    out = scratch / "out.json"
    flags = ["--ablation", "with-without", "--scaffold", "--allow-tools", "Write", *select]
    flags += ["--judge-model", "claude-haiku-5-5", "--json", str(out)]
    flags += ["--output-dir", str(scratch / "results")]
    with StubServer(load_script(stub)) as server:
        done = plugin_eval(plugin, scratch / "home", server.url, *flags)
    assert out.is_file(), done.stdout + done.stderr
    document: dict[str, Any] = json.loads(out.read_text())
    return done.returncode, document


def _ci_evals(
    plugin: Path, stub: Path, run_dir: Path, select: str = "tags: [core]"
) -> tuple[int, dict[str, Any]]:
    suite = plugin.parent / "ci-evals.yaml"
    suite.write_text(
        f"version: 1\nplugin: {plugin.name}\nablation: with-without\n"
        f"plugin_evals:\n  {select}\n  allow_tools: [Write]\n"
    )
    done = run_ci_evals(plugin.parent, "run", "--model", f"stub:{stub}", "--out", str(run_dir))
    assert (run_dir / "results.json").is_file(), done.stdout + done.stderr
    document: dict[str, Any] = json.loads((run_dir / "results.json").read_text())
    return done.returncode, document


@pytest.mark.slow
def test_one_suite_of_everything_scores_alike_with_and_without_the_plugin(
    tmp_path: Path,
) -> None:
    plugin = write_files(tmp_path / "helpdesk", PLUGIN_FILES)
    pinned = _pin_wiki_recording(plugin, RECORDING)
    stub = tmp_path / "stub.yaml"
    stub.write_text(STUB)

    code, cli = _cli(plugin, stub, tmp_path / "cli", "--tag", "core")
    assert code == 1  # `vague` is below the threshold
    cases = {c["name"]: c for c in cli["cases"]}
    assert set(cases) == {*EXPECTED, "vague"}  # `other` left out by --tag core
    theirs = {
        name: (c["aggregates"]["score"], c["aggregates"]["scoreWithout"], c["aggregates"]["delta"])
        for name, c in cases.items()
    }
    assert _flat(theirs) == pytest.approx(_flat({**EXPECTED, "vague": CLI_VAGUE})), theirs
    # The pin answered in both arms' with-runs of `wiki`, with no model call.
    assert cases["wiki"]["arms"]["with"][0]["mocks"]["calls"]["replay"] == {"hits": 1, "misses": 0}
    assert len(cases["greet"]["arms"]["with"]) == len(cases["greet"]["arms"]["without"]) == 2

    code, ours = _ci_evals(plugin, stub, tmp_path / "run")
    assert code == 1  # `vague` is an error
    summaries = {s["scenario"]: s for s in ours["summaries"]}
    assert set(summaries) == {*EXPECTED, "vague"}
    mine = {
        name: (s["arms"]["score"], s["arms"]["score_without"], s["arms"]["delta"])
        for name, s in summaries.items()
        if name != "vague"
    }
    assert _flat(mine) == pytest.approx(_flat(EXPECTED)), mine
    for name, summary in summaries.items():
        if name != "vague":
            assert summary["summary"]["verdict"] == "passed", (name, summary["summary"])
    (mocks,) = (tmp_path / "run").glob("wiki/*/plugin-eval-mocks.json")
    assert json.loads(mocks.read_text())["calls"]["replay_hits"] == 1
    assert (plugin / "evals" / "mocks" / ".replay" / "wiki" / pinned).is_file()

    # Documented difference (plugin-evals.md, "a judge's answer that is neither PASS
    # nor FAIL"): the CLI counts it a FAIL vote and scores the case; ci-evals makes
    # the grader, the stage and the case an `error`, with no score and no delta.
    vague = summaries["vague"]
    assert vague["summary"]["verdict"] == "error"
    assert vague["arms"]["delta"] is None
    stages = [
        stage["status"] for s in ours["scenarios"] if s["id"] == "vague" for stage in s["stages"]
    ]
    assert stages == ["error", "error"]  # one stage per arm
    # Documented difference ("Δ when a run errored"): the mean delta leaves `vague` out.
    assert cli["aggregates"]["meanDelta"] == pytest.approx((0.7 + 0.4 + 1.0 + 0.0) / 4)
    assert ours["mean_delta"] == pytest.approx((0.7 + 0.4 + 1.0) / 3)


@pytest.mark.slow
def test_a_pin_the_cli_would_not_replay_is_not_replayed(tmp_path: Path) -> None:
    """A `.replay/` file without the CLI's `recordedAt` and `model` (hand-written, or
    from an older tool): the CLI ignores it and asks the model; ci-evals replayed it
    until this test found the difference. Both now ask the stub, whose answer fails
    `found` (the only case: `wiki`; its without-arm scores 0.0 in both)."""
    plugin = write_files(tmp_path / "helpdesk", PLUGIN_FILES)
    # The CLI's schema requires `input`, `recordedAt` and `model`; a file lacking only
    # `input` was also run through the CLI by hand: a miss too.
    bare = {"input": WIKI_CALL, "output": RECORDING["output"], "verdict": "ok"}
    _pin_wiki_recording(plugin, bare)
    stub = tmp_path / "stub.yaml"
    stub.write_text(STUB)

    _, cli = _cli(plugin, stub, tmp_path / "cli", "--case", "wiki")
    (wiki,) = cli["cases"]
    assert wiki["arms"]["with"][0]["mocks"]["calls"]["replay"] == {"hits": 0, "misses": 1}
    assert (wiki["aggregates"]["score"], wiki["aggregates"]["scoreWithout"]) == (0.5, 0.0)

    _, ours = _ci_evals(plugin, stub, tmp_path / "run", select="cases: [wiki]")
    (summary,) = ours["summaries"]
    assert (summary["arms"]["score"], summary["arms"]["score_without"]) == pytest.approx((0.5, 0.0))
    (mocks,) = (tmp_path / "run").glob("wiki/*/plugin-eval-mocks.json")
    assert json.loads(mocks.read_text())["calls"]["replay_hits"] == 0


def test_a_change_to_one_case_folder_selects_only_that_case(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same suite under change selection: editing `greet`'s grader selects `greet`
    alone, though its mocks, scaffold and the other cases sit beside it."""
    write_files(repo / "helpdesk", PLUGIN_FILES)
    write_files(
        repo,
        {
            "ci-evals.yaml": "version: 1\nplugin: helpdesk\nplugin_evals: {tags: [core]}\n",
            "stage_map.yaml": (
                "version: 1\nroot: helpdesk\nevals: helpdesk/evals\n"
                'entries:\n  - { glob: "**", cases: ["*"] }\nglobal: ["ci-evals.yaml"]\n'
            ),
        },
    )
    base = commit(repo, "the helpdesk plugin")
    write_files(
        repo / "helpdesk", {"evals/greet/graders/says-hello.md": "---\ntype: regex\n---\nHello\n"}
    )
    commit(repo, "loosen greet")
    monkeypatch.chdir(repo)
    assert main(["compute-stage", base, "--json"]) == 0
    units = json.loads(capsys.readouterr().out)["units"]
    assert (units["kind"], units["all"], units["ids"]) == ("cases", False, ["greet"])
    assert git(repo, "status", "--porcelain") == ""
