"""The same case suite run by the bundled `claude plugin eval` and by ci-evals gives the
same per-case scores (issue 32, part 1's "Done when").

One plugin of our own with cases in every shape the CLI reads (prompt.md with
`graders/*.md`, case.yaml in a case group, both merged), every grader type
(the judges answered by the stub's rules on the judge's system prompt) and
target, weights, `runs: 2` and tags (one case filtered out by tag in both).
Both run against one stub model server (tests fake only the model, at its HTTP
boundary): the real CLI offline with `--trust-plugin
--ablation none --allow-tools Write`, and `ci-evals run` with the real SDK in
its bwrap sandbox under the same grant (`allow_tools: [Write]`). ci-evals' case
score is its stage's mean binary score / 100.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, load_script
from tests.run_helpers import plugin_eval, write_tree

pytestmark = pytest.mark.slow

PLUGIN_FILES = {
    ".claude-plugin/plugin.json": '{"name": "greeter", "version": "0.1.0"}\n',
    "skills/greet/SKILL.md": "---\nname: greet\ndescription: Greets a person\n---\nGreet them.\n",
    # A prose case: prompt.md and one grader file per type and target.
    "evals/hello/prompt.md": (
        "---\nmax_turns: 6\nruns: 2\ntags: [smoke]\nallowed_tools: [Write, Read]\n---\n"
        "Write a greeting for Alex into greeting.txt, then read it back.\n"
    ),
    "evals/hello/graders/says-hello.md": "---\ntype: regex\n---\n^Greeted Alex\\.$\n",
    "evals/hello/graders/wrote-greeting.md": "---\ntype: file_exists\npath: '*.txt'\n---\n",
    "evals/hello/graders/no-notes.md": (
        "---\ntype: file_exists\npath: '**/notes.md'\nexists: false\n---\n"
    ),
    "evals/hello/graders/wrote-it.md": (
        "---\ntype: tool_used\ntool: Write\ninput_match: 'greeting\\.txt'\n---\n"
    ),
    "evals/hello/graders/no-bash.md": "---\ntype: tool_used\ntool: Bash\nmin: 0\nmax: 0\n---\n",
    "evals/hello/graders/write-then-read.md": (
        "---\ntype: tool_order\nbefore: Write\nafter: {tool: Read, input_match: greeting}\n---\n"
    ),
    "evals/hello/graders/one-file.md": (
        "---\ntype: regex\ntarget: files\nmatch: 'count:1'\n---\n\\S+\n"
    ),
    "evals/hello/graders/content.md": (
        "---\ntype: regex\ntarget: {source: file, path: greeting.txt}\nflags: i\n---\nhello, alex\n"
    ),
    "evals/hello/graders/trace-names-file.md": (
        "---\ntype: regex\ntarget: trace\n---\ngreeting\\.txt\n"
    ),
    # Over the CLI's own JSON field names: its stream-json lines, not the SDK's messages.
    "evals/hello/graders/trace-field-names.md": (
        '---\ntype: regex\ntarget: trace\n---\n"type":"tool_use".*"name":"Write"\n'
    ),
    "evals/hello/graders/no-apology.md": (
        "---\ntype: regex\nmatch: not_contains\nflags: i\n---\nsorry\n"
    ),
    # A case.yaml case inside a case group: weights make its score 0.8 (4 of 5).
    "evals/group/weighted/case.yaml": """\
schema_version: "1.1"
name: weighted
tags: [yaml]
runs: 2
execution:
  prompt: "Say the magic word."
  max_turns: 3
graders:
  - {type: regex, name: magic, pattern: "^please$", flags: m, weight: 3}
  - {type: file_exists, name: wrote-nothing, path: magic.txt}
  - {type: regex, name: twice, pattern: "please", match: "count:2"}
""",
    # Both files: prompt.md's keys and body win, graders/ is appended.
    "evals/mixed/case.yaml": """\
schema_version: "1.1"
name: from-yaml
tags: [other]
runs: 1
execution: {prompt: "never used", disallowed_tools: [WebFetch]}
graders:
  - {type: regex, name: done, pattern: "Done"}
""",
    "evals/mixed/prompt.md": (
        "---\nname: mixed\ntags: [smoke]\nruns: 2\ndisallowed_tools: [WebSearch]\n---\n"
        "Report that you are done.\n"
    ),
    "evals/mixed/graders/short.md": "---\ntype: regex\nmatch: 'count:0'\n---\n\\n\n",
    # The judge: llm on the last message and (weight 2) on the trace, baseline on the trace.
    "evals/judged/prompt.md": "---\nruns: 1\ntags: [smoke]\n---\nPolitely greet Bea.\n",
    "evals/judged/graders/polite.md": "---\ntype: llm\n---\nThe reply greets Bea politely.\n",
    "evals/judged/graders/named.md": (
        "---\ntype: llm\nfocus: trace\nweight: 2\n---\nThe agent asked Bea for her surname.\n"
    ),
    "evals/judged/graders/warm.md": (
        "---\ntype: baseline\nbaseline_file: baseline.jsonl\n---\nGreets Bea as warmly.\n"
    ),
    "evals/judged/baseline.jsonl": (
        '{"type":"assistant","message":{"content":[{"type":"text","text":"Hi Bea."}]}}\n'
    ),
    # Left out by the tag filter in both runs.
    "evals/other/prompt.md": "---\ntags: [slow]\n---\nNot selected.\n",
    "evals/other/graders/any.md": "---\ntype: regex\n---\nx\n",
}

STUB = """\
rules:
  # Judges first: a judge's prompt holds the agent's words and trace.
  - name: judge-polite
    match: {system_contains: "evaluation judge", prompt_contains: "greets Bea politely"}
    turns:
      - text: "PASS"
  - name: judge-surname
    match: {system_contains: "evaluation judge", prompt_contains: "her surname"}
    turns:
      - text: "FAIL"
  - name: judge-warm
    match: {system_contains: "evaluation judge", prompt_contains: "as warmly"}
    turns:
      - text: "pass"
  - name: judged
    match: {prompt_contains: "Politely greet Bea"}
    turns:
      - text: "Good morning, Bea!"
  - name: hello
    match: {prompt_contains: "greeting for Alex"}
    turns:
      - tools:
          - write: {path: greeting.txt, content: "Hello, Alex!\\n"}
      - tools:
          - read: greeting.txt
      - text: "Greeted Alex."
  - name: weighted
    match: {prompt_contains: "magic word"}
    turns:
      - text: "please\\nplease"
  - name: mixed
    match: {prompt_contains: "you are done"}
    turns:
      - text: "Done."
"""


def _plugin(root: Path) -> Path:
    return write_tree(root / "greeter", PLUGIN_FILES)


def _cli_scores(plugin: Path, server: StubServer, scratch: Path) -> dict[str, float]:
    out = scratch / "out.json"
    flags = ("--allow-tools", "Write", "--tag", "smoke", "yaml", "--json", str(out))
    done = plugin_eval(plugin, scratch / "home", server.url, *flags)
    assert out.is_file(), done.stdout + done.stderr
    document = json.loads(out.read_text())
    scores = {}
    for case in document["cases"]:
        for run in case["arms"]["with"]:
            assert run["error"] is None, (case["name"], run["error"])
        scores[case["name"]] = case["aggregates"]["score"]
    return scores


def _ci_evals_scores(plugin: Path, stub: Path, scratch: Path) -> dict[str, float]:
    scratch.mkdir(parents=True)
    # Beside the plugin: a suite outside a git repository names only files below its folder.
    suite = plugin.parent / "ci-evals.yaml"
    # The same grant as the CLI's `--allow-tools Write`: the `hello` case's stub writes.
    suite.write_text(
        f"version: 1\nplugin: {plugin}\nplugin_evals:\n  tags: [smoke, yaml]\n"
        "  allow_tools: [Write]\n"
    )
    run_dir = scratch / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci_evals",
            "run",
            "--suite",
            str(suite),
            "--model",
            f"stub:{stub}",
            "--out",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=scratch,
    )
    results = run_dir / "results.json"
    assert results.is_file(), done.stdout + done.stderr
    document = json.loads(results.read_text())
    for scenario in document["scenarios"]:
        for stage in scenario["stages"]:
            assert stage["status"] in ("passed", "failed"), (scenario["id"], stage)
    return {
        summary["scenario"]: summary["summary"]["binary_score"]["mean"] / 100
        for summary in document["summaries"]
    }


def test_claude_plugin_eval_and_ci_evals_score_every_case_alike(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    stub = tmp_path / "stub.yaml"
    stub.write_text(STUB)
    with StubServer(load_script(stub)) as server:
        theirs = _cli_scores(plugin, server, tmp_path / "cli")
    ours = _ci_evals_scores(plugin, stub, tmp_path / "ci")
    assert theirs == {"hello": 1.0, "weighted": 0.8, "mixed": 1.0, "judged": 0.5}
    assert ours == pytest.approx(theirs)
    # Each judge's votes too: the CLI's judgeVotes, ci-evals' plugin-eval-judge.json.
    cli = json.loads((tmp_path / "cli" / "out.json").read_text())
    (judged,) = [c for c in cli["cases"] if c["name"] == "judged"]
    their_votes = {g["name"]: g["judgeVotes"] for g in judged["arms"]["with"][0]["graders"]}
    (saved,) = (tmp_path / "ci" / "run").glob("judged/**/plugin-eval-judge.json")
    our_votes = {g["name"]: g["judgeVotes"] for g in json.loads(saved.read_text())["graders"]}
    assert (
        their_votes
        == our_votes
        == {
            "named": [False] * 3,
            "polite": [True] * 3,
            "warm": [True] * 3,
        }
    )


def test_a_run_that_errored_is_an_error_not_a_graded_pass(tmp_path: Path) -> None:
    """Only negative graders, and the model endpoint refuses every request: the CLI
    grades such a run (every grader passes, 1.00); ci-evals makes it an `error`."""
    plugin = tmp_path / "p"
    files = {
        ".claude-plugin/plugin.json": '{"name": "p"}',
        "evals/quiet/prompt.md": "---\nruns: 1\n---\nDo nothing.\n",
        "evals/quiet/graders/no-sorry.md": "---\ntype: regex\nmatch: not_contains\n---\nsorry\n",
        "evals/quiet/graders/no-file.md": "---\ntype: file_exists\npath: '*'\nexists: false\n---\n",
        "evals/quiet/graders/no-read.md": "---\ntype: tool_used\ntool: Read\nmin: 0\nmax: 0\n---\n",
    }
    for rel, text in files.items():
        (plugin / rel).parent.mkdir(parents=True, exist_ok=True)
        (plugin / rel).write_text(text)
    stub = tmp_path / "stub.yaml"
    stub.write_text("rules:\n  - name: down\n    turns:\n      - fault: {http_status: 400}\n")
    (tmp_path / "ci-evals.yaml").write_text("version: 1\nplugin: p\nplugin_evals: {}\n")
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "--model", "stub:stub.yaml", "--out", "run"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    document = json.loads((tmp_path / "run" / "results.json").read_text())
    stage = document["scenarios"][0]["stages"][0]
    assert stage["status"] == "error" and stage["grading"] is None, stage
    assert document["summaries"][0]["summary"]["verdict"] == "error"


def test_a_threshold_below_one_passes_on_the_mean_run_score_in_both(tmp_path: Path) -> None:
    """`runs: 2` scoring 1.0 then 0.0 (the stub's variants, one per session): at
    threshold 0.5 the CLI exits 0 and so does ci-evals, whose results.json records
    the rule; `report` recomputes the summaries under it, and a file whose threshold
    was raised after the run is refused as inconsistent."""
    plugin = tmp_path / "p"
    files = {
        ".claude-plugin/plugin.json": '{"name": "p"}',
        "evals/half/prompt.md": "---\nruns: 2\n---\nGreet half the time.\n",
        "evals/half/graders/hello.md": "---\ntype: regex\n---\nHello\n",
    }
    for rel, text in files.items():
        (plugin / rel).parent.mkdir(parents=True, exist_ok=True)
        (plugin / rel).write_text(text)
    stub = tmp_path / "stub.yaml"
    stub.write_text(
        "rules:\n  - name: half\n    match: {prompt_contains: half the time}\n"
        '    variants:\n      - [{text: "Hello!"}]\n      - [{text: "No."}]\n'
    )
    with StubServer(load_script(stub)) as server:
        flags = ("--threshold", "0.5", "--json", str(tmp_path / "cli.json"))
        cli = plugin_eval(plugin, tmp_path / "home", server.url, *flags)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    (case,) = json.loads((tmp_path / "cli.json").read_text())["cases"]
    assert sorted(r["score"] for r in case["arms"]["with"]) == [0.0, 1.0]

    (tmp_path / "ci-evals.yaml").write_text(
        "version: 1\nplugin: p\nplugin_evals:\n  threshold: 0.5\n"
    )

    def ci_evals(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ci_evals", *args],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd=tmp_path,
        )

    done = ci_evals("run", "--model", "stub:stub.yaml", "--out", "run")
    assert done.returncode == 0, done.stdout + done.stderr
    results = tmp_path / "run" / "results.json"
    document = json.loads(results.read_text())
    assert document["score_at_least"] == 0.5
    (summary,) = document["summaries"]
    assert summary["summary"]["verdict"] == "passed"
    assert summary["summary"]["reason"] == "mean score 0.50 over 2 run(s) (needs 0.5)"
    assert ci_evals("report", "run", "--markdown", "summary.md").returncode == 0
    document["score_at_least"] = 0.75
    results.write_text(json.dumps(document))
    forged = ci_evals("report", "run", "--markdown", "summary.md")
    assert forged.returncode == 2, forged.stdout + forged.stderr
    assert "recomputed from the stages it is failed" in forged.stderr + forged.stdout
