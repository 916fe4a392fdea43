"""What `--from-stage` and `check-fixtures` mean for a suite of cases, whose units
each run one stage (stage 1, from an empty workspace) and have no fixtures: stage 1
is every case from its start; anything else, and a check of fixtures there are
none of, is refused in one line saying what to do instead. The pre-commit hook
(`check-fixtures --contracts-only`) has nothing to check and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals.main import main

FILES = {
    "plugin/.claude-plugin/plugin.json": '{"name": "p"}',
    "plugin/evals/greet/prompt.md": "---\nruns: 1\n---\nSay hi.\n",
    "plugin/evals/greet/graders/said.md": "---\ntype: regex\n---\nhi\n",
    "ci-evals.yaml": "version: 1\nplugin: plugin\nplugin_evals: {}\n",
    "stub.yaml": 'rules:\n  - name: hi\n    match: {prompt_contains: "Say hi"}\n'
    "    turns: [{text: hi}]\n",
}


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "ci-evals.yaml"


def test_from_stage_one_is_every_case_from_its_start(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--from-stage", "1", "--model", "stub:stub.yaml"]) == 0
    assert "from stage 1 (greet)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("2", "run every case from its start (no --from-stage), or some: --scenario CASE"),
        ("greet", "to run only that case: --scenario greet"),
    ],
)
def test_a_later_stage_is_refused_in_one_line(
    suite: Path, capsys: pytest.CaptureFixture[str], given: str, hint: str
) -> None:
    assert main(["run", "--from-stage", given, "--model", "stub:stub.yaml"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"ci-evals: error: ci-evals.yaml: --from-stage {given}: a suite of")
    assert "there is no later stage to start from" in line and line.endswith(f"({hint})")
    assert not (suite.parent / ".ci-evals").exists()  # nothing started


def test_check_fixtures_refuses_a_suite_of_cases_and_the_hook_passes_saying_why(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check-fixtures", "--model", "stub:stub.yaml"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "check-fixtures: a suite of cases (plugin_evals:) has no fixtures to grade" in line
    assert "ci-evals run --model stub:FILE" in line
    assert main(["check-fixtures", "--contracts-only"]) == 0
    said = capsys.readouterr()
    assert said.out == "contracts: none (a suite of cases, plugin_evals:, has no fixtures)\n"
