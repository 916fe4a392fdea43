"""The with/without-plugin arm gives the same per-case scores as `claude plugin eval
--ablation with-without` (issue 32, part 2).

One plugin of our own with a skill and three cases: graders in both arms, the
with-only kinds (`arm: with-only`, a `tool_used` on `Skill` with no `arm`), an
`arm: both` one, and a case whose graders are all with-only (then all count).
The stub model answers each arm differently by what the CLI lists to the model
(`context_contains` on the plugin's skill, which only the with-arm's requests
carry). The bundled CLI runs offline against it, and `ci-evals run --ablation
with-without` against the same script; per case the score with, without and the
delta agree, and so does the mean delta.
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
    "skills/greet/SKILL.md": (
        "---\nname: greet\ndescription: Greets a person the greeter way\n---\n"
        "Say 'Hello, NAME! (greeter)'.\n"
    ),
    "evals/hello/prompt.md": "---\nruns: 2\n---\nGreet Alex.\n",
    "evals/hello/graders/says-hello.md": "---\ntype: regex\n---\nHello, Alex!\n",
    "evals/hello/graders/used-skill.md": "---\ntype: tool_used\ntool: Skill\n---\n",
    "evals/hello/graders/signed.md": "---\ntype: regex\narm: with-only\n---\n\\(greeter\\)\n",
    "evals/hello/graders/no-bash.md": (
        "---\ntype: tool_used\ntool: Bash\nmin: 0\nmax: 0\narm: both\n---\n"
    ),
    "evals/fired/case.yaml": """\
schema_version: "1.1"
name: fired
runs: 1
execution:
  prompt: "Greet Bea."
graders:
  - {type: tool_used, name: skill, tool: Skill}
  - {type: regex, name: signed, pattern: "greeter", arm: with-only}
""",
    "evals/plain/prompt.md": "---\nruns: 1\n---\nSay done.\n",
    "evals/plain/graders/done.md": "---\ntype: regex\n---\nDone\n",
}

STUB = """\
rules:
  # The with-arm: the CLI lists the plugin's skill to the model.
  - name: alex-with
    match: {prompt_contains: "Greet Alex", context_contains: "greeter:greet"}
    turns:
      - tools:
          - skill: greeter:greet
      - text: "Hello, Alex! (greeter)"
  - name: alex-without
    match: {prompt_contains: "Greet Alex", context_lacks: "greeter:greet"}
    turns:
      - text: "Hi Alex."
  - name: bea-with
    match: {prompt_contains: "Greet Bea", context_contains: "greeter:greet"}
    turns:
      - tools:
          - skill: greeter:greet
      - text: "Hello, Bea! (greeter)"
  - name: bea-without
    match: {prompt_contains: "Greet Bea"}
    turns:
      - text: "Hi Bea."
  - name: plain
    match: {prompt_contains: "Say done"}
    turns:
      - text: "Done."
"""

# case -> (score with, score without, delta)
EXPECTED = {
    "hello": (1.0, 0.5, 0.5),  # says-hello and no-bash scored; used-skill and signed not
    "fired": (1.0, 0.0, 1.0),  # every grader with-only: all count, in both arms
    "plain": (1.0, 1.0, 0.0),
}


def _flat(scores: dict[str, tuple[float, float, float]]) -> dict[tuple[str, int], float]:
    return {(case, i): value for case, three in scores.items() for i, value in enumerate(three)}


def _plugin(root: Path) -> Path:
    return write_tree(root / "greeter", PLUGIN_FILES)


def _cli(plugin: Path, server: StubServer, scratch: Path) -> dict[str, object]:
    out = scratch / "out.json"
    done = plugin_eval(
        plugin, scratch / "home", server.url, "--ablation", "with-without", "--json", str(out)
    )
    assert out.is_file(), done.stdout + done.stderr
    document: dict[str, object] = json.loads(out.read_text())
    return document


def _ci_evals(plugin: Path, stub: Path, scratch: Path) -> dict[str, object]:
    scratch.mkdir(parents=True)
    suite = plugin.parent / "ci-evals.yaml"
    suite.write_text(f"version: 1\nplugin: {plugin}\nplugin_evals: {{}}\n")
    run_dir = scratch / "run"
    argv = [sys.executable, "-m", "ci_evals", "run", "--suite", str(suite)]
    argv += ["--model", f"stub:{stub}", "--out", str(run_dir), "--ablation", "with-without"]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, check=False, cwd=scratch
    )
    results = run_dir / "results.json"
    assert results.is_file(), done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    document: dict[str, object] = json.loads(results.read_text())
    # Re-graded, each arm under the same with-only rule: the same arms, the same delta.
    regraded = scratch / "regraded.json"
    argv = [sys.executable, "-m", "ci_evals", "grade", str(run_dir), "--suite", str(suite)]
    done = subprocess.run(
        [*argv, "--output", str(regraded)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=scratch,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    again = json.loads(regraded.read_text())
    assert again["summaries"] == document["summaries"]
    assert again["mean_delta"] == document["mean_delta"]
    return document


def test_the_cli_and_ci_evals_score_each_arm_alike(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    stub = tmp_path / "stub.yaml"
    stub.write_text(STUB)
    with StubServer(load_script(stub)) as server:
        cli = _cli(plugin, server, tmp_path / "cli")
    ours = _ci_evals(plugin, stub, tmp_path / "ci")

    cases = cli["cases"]
    assert isinstance(cases, list)
    theirs = {
        c["name"]: (
            c["aggregates"]["score"],
            c["aggregates"]["scoreWithout"],
            c["aggregates"]["delta"],
        )
        for c in cases
    }
    assert _flat(theirs) == pytest.approx(_flat(EXPECTED))
    summaries = ours["summaries"]
    assert isinstance(summaries, list)
    mine = {
        s["scenario"]: (s["arms"]["score"], s["arms"]["score_without"], s["arms"]["delta"])
        for s in summaries
    }
    assert _flat(mine) == pytest.approx(_flat(theirs))
    aggregates = cli["aggregates"]
    assert isinstance(aggregates, dict)
    assert ours["mean_delta"] == pytest.approx(aggregates["meanDelta"]) == pytest.approx(0.5)
    # The with-only graders: shown, not scored, in the with-arm; not run without.
    (hello,) = [c for c in cases if c["name"] == "hello"]
    with_only = {g["name"] for g in hello["arms"]["with"][0]["graders"] if g["withOnly"]}
    without = {g["name"] for g in hello["arms"]["without"][0]["graders"]}
    assert with_only == {"used-skill", "signed"} and without == {"says-hello", "no-bash"}
    scenarios = ours["scenarios"]
    assert isinstance(scenarios, list)
    for scenario in scenarios:
        if scenario["id"] != "hello":
            continue
        (stage,) = scenario["stages"]
        criteria = {c["id"]: c["advisory"] for c in stage["grading"]["graders"][0]["criteria"]}
        if scenario["arm"] == "with":
            assert criteria == {
                "says-hello": False,
                "used-skill": True,
                "signed": True,
                "no-bash": False,
            }
        else:
            assert criteria == {"says-hello": False, "no-bash": False}
