"""`ablation: with-without` on a phased suite: every scenario also runs without the
plugin (issue 32, part 2), through `ci-evals run` as a user runs it (the real CLI in
its sandbox, the stub model answering each arm by what the CLI lists to it).

Stage 1 is plain words (both arms alike), stage 2 a plugin command with a
`prompt_without:` (the without-arm does less), stage 3 a plugin command with none
(single-arm, and said so). The verdict and the exit code are the with-arm's; the
reports show with, without and Δ; the without-arm's agent cannot reach the plugin.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.run.test_run_command import ci_evals

pytestmark = pytest.mark.slow

SUITE = """\
version: 1
plugin: plugin
stage_map: null
ablation: with-without
limits: {max_turns: 10, timeout_s: 120}
stages:
  - name: notes
    prompt: "Write notes for {company}."
    checks: [{files: notes.md}]
  - name: plan
    prompt: "/demo:plan {company}"
    prompt_without: "Write a plan for {company} into plan.md."
    checks: [{files: plan.md}, {files: signed.txt}]
  - name: ship
    prompt: "/demo:ship {company}"
    checks: [{files: shipped.txt}]
scenarios:
  - id: acme
    inputs: {company: Acme}
"""

STUB = """\
rules:
  - name: notes
    match: {prompt_contains: "Write notes"}
    turns:
      - tools:
          - write: {path: notes.md, content: "notes\\n"}
          - bash: "cat ../plugin/.claude-plugin/plugin.json > seen.txt 2>&1 || echo no >> seen.txt"
      - text: "noted"
  - name: plan-with
    match: {command: "demo:plan", context_contains: "demo:plan"}
    turns:
      - tools:
          - write: {path: plan.md, content: "the plan\\n"}
          - write: {path: signed.txt, content: "demo\\n"}
      - text: "planned"
  - name: plan-without
    match: {prompt_contains: "Write a plan for Acme", context_lacks: "demo:"}
    turns:
      - tools:
          - write: {path: plan.md, content: "a plan\\n"}
      - text: "planned"
  - name: ship
    match: {command: "demo:ship"}
    turns:
      - tools:
          - write: {path: shipped.txt, content: "shipped\\n"}
      - text: "shipped"
"""


def _suite(root: Path) -> None:
    plugin = root / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "demo", "version": "1.0.0"}')
    (plugin / "commands").mkdir()
    for name in ("plan", "ship"):
        (plugin / "commands" / f"{name}.md").write_text(
            f"---\ndescription: {name} it\n---\nDo {name} for $ARGUMENTS.\n"
        )
    (root / "ci-evals.yaml").write_text(SUITE)
    (root / "stub.yaml").write_text(STUB)


def test_a_phased_suite_runs_each_stage_with_and_without_the_plugin(tmp_path: Path) -> None:
    _suite(tmp_path)
    done = ci_evals("run", "--model", "stub:stub.yaml", "--out", "run", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ci-evals: stage 3 (ship) runs only with the plugin: its prompt is" in done.stderr
    assert "acme 2 plan  with 1.00  without 0.50  Δ +0.50" in done.stdout
    assert "mean Δ +0.25" in done.stdout
    document = json.loads((tmp_path / "run" / "results.json").read_text())
    assert document["ablation"] == "with-without"
    arms = {s["stage"]: s["arms"] for s in document["summaries"]}
    assert (arms[1]["score"], arms[1]["score_without"], arms[1]["delta"]) == (1.0, 1.0, 0.0)
    assert (arms[2]["score"], arms[2]["score_without"], arms[2]["delta"]) == (1.0, 0.5, 0.5)
    assert arms[3]["delta"] is None and arms[3]["score_without"] is None
    assert "/demo:ship" in arms[3]["single_arm"] and "prompt_without" in arms[3]["single_arm"]
    assert document["mean_delta"] == 0.25
    (without,) = [s for s in document["scenarios"] if s["arm"] == "without"]
    assert [s["status"] for s in without["stages"]] == ["passed", "failed", "skipped"]
    # The without-arm's agent was given no plugin: not even the copy the graders read.
    with_seen = tmp_path / "run" / "acme" / "1-notes" / "produced" / "seen.txt"
    without_seen = tmp_path / "run" / "acme" / "without" / "1-notes" / "produced" / "seen.txt"
    assert '"demo"' in with_seen.read_text()
    assert '"demo"' not in without_seen.read_text()

    report = ci_evals(
        "report", "run", "--markdown", "summary.md", "--junit", "junit.xml", cwd=tmp_path
    )
    assert report.returncode == 0, report.stdout + report.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "### With and without the plugin" in summary
    assert "| acme | 2 plan | 1.00 | 0.50 | +0.50 |" in summary
    assert "Mean Δ +0.25" in summary
    assert "Not passed" not in summary  # the without-arm's failed stage is no failure
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert (root.get("failures"), root.get("errors")) == ("0", "0")
    skipped = [
        case.find("skipped")
        for suite in root.iter("testsuite")
        if suite.get("name") == "acme (without)"
        for case in suite.iter("testcase")
    ]
    assert len(skipped) == 3 and all(s is not None for s in skipped)
    site = ci_evals("report", "run", "--html", "site", cwd=tmp_path)
    assert site.returncode == 0, site.stderr
    assert "With and without the plugin" in (tmp_path / "site" / "index.html").read_text()
    page = (tmp_path / "site" / "stage-2-2.html").read_text()  # acme (without), stage 2
    assert "without the plugin: failed (compared with the run with it, never a verdict)" in page


def test_prompt_without_that_names_a_command_is_refused(tmp_path: Path) -> None:
    _suite(tmp_path)
    suite = tmp_path / "ci-evals.yaml"
    suite.write_text(suite.read_text().replace("Write a plan for", "/demo:plan for"))
    done = ci_evals("check", "--model", "stub:stub.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "ci-evals check: ci-evals.yaml:12:21: stages[1].prompt_without: prompt_without names "
        "a slash command: the run without the plugin has none (say in words what the command "
        "would have the agent do)",
        "ci-evals check: 1 problem; nothing was started",
    ]
