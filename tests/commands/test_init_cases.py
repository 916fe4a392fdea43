"""`ci-evals init` on a plugin with `claude plugin eval` cases: a suite that runs them
(`plugin_evals:`) and a stub script under which every case passes, following only
the lines init prints (a real git repository, the real SDK in its sandbox, the stub).

The plugin's cases use every deterministic grader type (regex on each target and
match kind, tool_used with input_match and min/max, tool_order, file_exists both
ways) and an llm and a baseline judge; its eval folder is the manifest's
`experimental.evals`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.grading.kinds.js_regex import compile_js
from ci_evals.suite.draft_cases import sample_of
from tests.conftest import git
from tests.onboarding_helpers import cli, follow_printed_lines

CASES = {
    ".claude-plugin/plugin.json": '{"name": "greeter", "experimental": {"evals": "quality/evals"}}',
    "skills/greet/SKILL.md": "---\nname: greet\ndescription: Greets a person\n---\nGreet them.\n",
    "quality/evals/hello/prompt.md": (
        "---\nruns: 1\nmax_turns: 8\n---\nWrite a greeting for Alex into greeting.txt.\n"
    ),
    "quality/evals/hello/graders/says-hello.md": "---\ntype: regex\n---\n^Greeted Alex\\.$\n",
    "quality/evals/hello/graders/wrote-it.md": (
        "---\ntype: tool_used\ntool: Write\ninput_match: 'greeting\\.txt'\nmax: 1\n---\n"
    ),
    "quality/evals/hello/graders/content.md": (
        "---\ntype: regex\ntarget: {source: file, path: greeting.txt}\nflags: i\n---\nhello, alex\n"
    ),
    "quality/evals/hello/graders/a-text-file.md": "---\ntype: file_exists\npath: '**/*.txt'\n---\n",
    "quality/evals/hello/graders/no-notes.md": (
        "---\ntype: file_exists\npath: '**/notes.md'\nexists: false\n---\n"
    ),
    "quality/evals/hello/graders/no-bash.md": (
        "---\ntype: tool_used\ntool: Bash\nmin: 0\nmax: 0\n---\n"
    ),
    "quality/evals/hello/graders/write-then-read.md": (
        "---\ntype: tool_order\nbefore: Write\nafter: {tool: Read, input_match: greeting}\n---\n"
    ),
    "quality/evals/hello/graders/files-list.md": (
        "---\ntype: regex\ntarget: files\n---\ngreeting\\.txt\n"
    ),
    "quality/evals/hello/graders/trace.md": (
        '---\ntype: regex\ntarget: trace\n---\n"name":"Read"\n'
    ),
    "quality/evals/hello/graders/no-apology.md": (
        "---\ntype: regex\nmatch: not_contains\nflags: i\n---\nsorry\n"
    ),
    "quality/evals/group/magic/case.yaml": """\
schema_version: "1.1"
name: magic
runs: 2
execution:
  prompt: "Say the magic word, twice."
  max_turns: 3
graders:
  - {type: regex, name: magic, pattern: "^ple(a|e)se$", flags: m, weight: 3}
  - {type: regex, name: twice, pattern: "please", match: "count:2"}
  - {type: regex, name: one-line-each, pattern: "\\\\d{3}", match: "count:0"}
  - {type: tool_used, name: skill, tool: Skill, input_match: "gre+t"}
""",
    "quality/evals/judged/prompt.md": "Politely greet Bea.\n",  # runs: 3, the default
    "quality/evals/judged/graders/polite.md": "---\ntype: llm\n---\nThe reply greets Bea.\n",
    "quality/evals/judged/graders/warm.md": (
        "---\ntype: baseline\nbaseline_file: baseline.jsonl\n---\nGreets Bea as warmly.\n"
    ),
    "quality/evals/judged/baseline.jsonl": (
        '{"type":"assistant","message":{"content":[{"type":"text","text":"Hi Bea."}]}}\n'
    ),
}


@pytest.mark.parametrize(
    ("pattern", "flags"),
    [
        ("^Greeted Alex\\.$", ""),
        ("\\S+@[a-z]+\\.(com|org)", ""),
        ("[^a-z ]{2,}x*", "i"),
        ("(?<year>\\d{4})-\\d\\d", "u"),
        ("a.b\\s\\w", "s"),
    ],
)
def test_a_sample_is_a_text_the_javascript_pattern_finds(pattern: str, flags: str) -> None:
    js = compile_js(pattern, flags)
    sample = sample_of(js)
    assert sample is not None and js.test(sample)


@pytest.mark.slow
def test_init_on_cases_drafts_a_suite_that_runs_them_green(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    plugin = repo / "greeter"
    for rel, text in CASES.items():
        (plugin / rel).parent.mkdir(parents=True, exist_ok=True)
        (plugin / rel).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the plugin and its cases")

    proc = cli(repo, "init", "greeter")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == (
        "drafted a suite running the plugin's 3 claude plugin eval case(s) in "
        "greeter/quality/evals/ (plugin_evals:), each on the stub as its graders ask, "
        "and a stage map sending each plugin file to the cases that name it"
    ), proc.stdout
    assert "not satisfied" not in proc.stdout
    assert lines[-1] == (
        "next: git add -A && ci-evals check-coverage && "
        "ci-evals check --model stub:stub/greeter.yaml && "
        "ci-evals run --model stub:stub/greeter.yaml"
    )
    assert (repo / "stage_map.yaml").is_file()  # the cases a change selects
    follow_printed_lines(repo, proc.stdout)

    (found,) = (repo / ".ci-evals" / "runs").glob("*/results.json")
    results = json.loads(found.read_text())
    verdicts = {s["scenario"]: s["summary"]["verdict"] for s in results["summaries"]}
    assert verdicts == {"hello": "passed", "magic": "passed", "judged": "passed"}
    runs = {s["id"]: s["repeats"] for s in results["scenarios"]}
    assert runs == {"hello": 1, "magic": 2, "judged": 3}
    for scenario in results["scenarios"]:
        (stage,) = scenario["stages"]
        criteria = [c for g in stage["grading"]["graders"] for c in g["criteria"]]
        assert criteria and all(c["passed"] for c in criteria), (scenario["id"], criteria)
        assert stage["grading"]["binary_score"] == 100.0


def test_a_case_init_cannot_satisfy_is_named(tmp_path: Path) -> None:
    """Two graders no run can both pass: init says which, and writes the rest."""
    repo = tmp_path / "repo"
    plugin = repo / "p"
    files = {
        ".claude-plugin/plugin.json": '{"name": "p"}',
        "evals/c/prompt.md": "Do it.\n",
        "evals/c/graders/yes.md": "---\ntype: regex\n---\nyes\n",
        "evals/c/graders/no.md": "---\ntype: regex\nmatch: not_contains\n---\nye\n",
    }
    for rel, text in files.items():
        (plugin / rel).parent.mkdir(parents=True, exist_ok=True)
        (plugin / rel).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    proc = cli(repo, "init", "p")
    assert proc.returncode == 0, proc.stderr
    assert "not satisfied on the stub: c: no: the drafted run would fail it" in proc.stdout
    assert "# NOT SATISFIED: c: no:" in (repo / "stub" / "p.yaml").read_text()


def test_a_case_run_would_refuse_stops_init_at_its_place(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    plugin = repo / "p"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin/plugin.json").write_text('{"name": "p"}')
    (plugin / "evals/c/graders").mkdir(parents=True)
    (plugin / "evals/c/prompt.md").write_text("---\nturns: 3\n---\nx\n")
    (plugin / "evals/c/graders/g.md").write_text("---\ntype: regex\n---\nx\n")
    git(repo, "init", "-q", "-b", "main")
    proc = cli(repo, "init", "p")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("ci-evals: error: p/evals/c/prompt.md:2:"), line
    assert 'unknown frontmatter key "turns"' in line
    assert not (repo / "ci-evals.yaml").exists()
