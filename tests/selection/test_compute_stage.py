"""`ci-evals compute-stage`: output forms, Actions outputs and escaping, errors."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ci_evals.commands.compute_stage import matches_output
from ci_evals.main import main
from ci_evals.selection.decide import Match, Selection
from tests.conftest import git
from tests.stage_repo import commit, plugin_repo, write

JSON_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["from_stage", "reason", "changed", "matches"],
    "properties": {
        "from_stage": {"type": ["integer", "null"], "minimum": 1},
        "reason": {
            "enum": [
                "matched",
                "unmatched-file",
                "global-file",
                "fixture-changed",
                "link-target-changed",
                "base-missing",
                "base-zero-sha",
                "no-merge-base",
                "no-relevant-change",
                "base-equals-head",
            ]
        },
        "changed": {"type": "integer", "minimum": 0},
        "matches": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "stage", "entry"],
                "properties": {
                    "path": {"type": "string"},
                    "stage": {"type": ["integer", "null"]},
                    "entry": {"type": ["string", "null"]},
                },
            },
        },
    },
}

ODD = "plugin/skills/plan/a\n::error::injected%0A,x:y.md"


@pytest.fixture(autouse=True)
def _not_in_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests choose for themselves whether they run "in Actions"."""
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def feature(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """main + a `feature` branch changing a stage-2 file and a file outside the plugin."""
    plugin_repo(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo, "plugin/skills/plan/SKILL.md")
    write(repo, "src/app.py")
    commit(repo)
    monkeypatch.chdir(repo)
    return repo


def test_plain_prints_the_stage_and_the_reason_on_stderr(
    feature: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compute-stage", "main"]) == 0
    out, err = capsys.readouterr()
    assert out == "2\n"
    assert err == (
        "ci-evals compute-stage: stage 2 (matched): plugin/skills/plan/SKILL.md: "
        "entry 'skills/plan/**' (stage_map.yaml:7)\n"
    )


def test_plain_none(feature: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compute-stage", "feature"]) == 0
    out, err = capsys.readouterr()
    assert out == "none\n"
    assert "(base-equals-head)" in err


def test_default_map_is_found_from_a_subfolder(
    feature: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(feature / "plugin" / "skills")
    assert main(["compute-stage", "main"]) == 0
    assert capsys.readouterr().out == "2\n"


def test_json_is_one_object_in_the_documented_shape(
    feature: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compute-stage", "main", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, JSON_SCHEMA)
    assert data == {
        "from_stage": 2,
        "reason": "matched",
        "changed": 2,
        "matches": [
            {"path": "plugin/skills/plan/SKILL.md", "stage": 2, "entry": "skills/plan/**"},
            {"path": "src/app.py", "stage": None, "entry": None},
        ],
    }


@pytest.mark.parametrize("base", ["0" * 40, "no-such-ref", "feature"])
def test_json_for_fallbacks_and_none(
    feature: Path, capsys: pytest.CaptureFixture[str], base: str
) -> None:
    assert main(["compute-stage", base, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, JSON_SCHEMA)
    assert data["matches"] == []
    assert data["changed"] == 0


def test_explain_says_which_file_decided_and_why(
    feature: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compute-stage", "main", "--explain"]) == 0
    text = capsys.readouterr().out
    assert "answer:   run from stage 2 (plan)" in text
    assert "reason:   matched — plugin/skills/plan/SKILL.md: entry 'skills/plan/**'" in text
    assert (
        " * stage 2  plugin/skills/plan/SKILL.md  [matched] entry 'skills/plan/**' "
        "(stage_map.yaml:7)"
    ) in text
    assert "changed:  2 path(s): 1 relevant, 1 ignored" in text
    assert "(merge base " in text


def test_explain_keeps_an_odd_name_on_one_line(
    feature: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(feature, ODD)
    commit(feature)
    assert main(["compute-stage", "main", "--explain"]) == 0
    text = capsys.readouterr().out
    assert json.dumps(ODD) in text
    assert not any(line.startswith("::") for line in text.splitlines())


def parse_outputs(text: str) -> dict[str, str]:
    """Read `$GITHUB_OUTPUT` the way the runner does (`name=value`, `name<<DELIM`)."""
    values: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines) and lines[i]:
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)
            values[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
        else:
            name, value = line.split("=", 1)
            values[name] = value
            i += 1
    return values


def test_actions_outputs_with_a_newline_in_a_path(
    feature: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write(feature, ODD)
    write(feature, "plugin/agents/helper.py")  # unmatched: stage 1 decides
    commit(feature)
    output = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))

    assert main(["compute-stage", "main"]) == 0

    out, err = capsys.readouterr()
    assert out == "1\n"
    values = parse_outputs(output.read_text(encoding="utf-8"))
    assert values["from_stage"] == "1"
    assert values["reason"] == "unmatched-file"
    assert values["changed_count"] == "4"
    assert values["matches_truncated"] == "false"
    assert json.loads(values["matches_json"]) == [
        {"path": "plugin/agents/helper.py", "stage": 1, "entry": None},
        {"path": "plugin/skills/plan/SKILL.md", "stage": 2, "entry": "skills/plan/**"},
        {"path": ODD, "stage": 2, "entry": "skills/plan/**"},
    ]
    # The one workflow command printed is escaped; no name can start another.
    assert [line for line in err.splitlines() if line.startswith("::")] == [
        "::notice file=plugin/agents/helper.py,title=ci-evals compute-stage%3A 1::"
        "stage 1 (unmatched-file): plugin/agents/helper.py: under the plugin root; "
        "no entry covers it"
    ]


def test_actions_annotation_escapes_the_deciding_path(
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plugin_repo(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo, ODD)
    commit(repo)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))

    assert main(["compute-stage", "main"]) == 0

    err = capsys.readouterr().err
    # The runner reads a command only at the start of a line.
    commands = [line for line in err.splitlines() if line.strip().startswith("::")]
    assert len(commands) == 1
    assert commands[0].startswith(
        "::notice file=plugin/skills/plan/a%0A%3A%3Aerror%3A%3Ainjected%250A%2Cx%3Ay.md,"
    )
    # The plain reason line shows the name quoted, on one line.
    assert json.dumps(ODD) in err


def test_matches_output_is_cut_to_its_limit() -> None:
    matches = tuple(Match(f"plugin/{i:03}.md", 3, "*.md", "matched", "") for i in range(100))
    chosen = Selection(3, "matched", 100, matches)

    full, cut = matches_output(chosen)
    short, was_cut = matches_output(chosen, limit=500)

    assert (len(json.loads(full)), cut) == (100, False)
    assert was_cut
    assert 0 < len(json.loads(short)) < 100
    assert len(short.encode()) <= 500


def test_no_base_outside_actions_is_a_usage_error(
    feature: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compute-stage"]) == 2
    assert "BASE is required outside GitHub Actions" in capsys.readouterr().err


def test_missing_map_is_a_usage_error(feature: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compute-stage", "main", "--map", "nope.yaml"]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_head_that_names_no_commit_is_a_usage_error(
    feature: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compute-stage", "main", "--head", "no-such-rev"]) == 2
    assert "--head: HEAD revision 'no-such-rev' names no commit" in capsys.readouterr().err


def test_broken_map_is_reported_while_git_works(
    feature: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (feature / "stage_map.yaml").write_text("version: 1\nroot: [\n", encoding="utf-8")
    assert main(["compute-stage", "main"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ci-evals: error: stage_map.yaml:")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("extra", [["--deepen", "-1"], ["--json", "--explain"]])
def test_bad_options(feature: Path, extra: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compute-stage", "main", *extra])
    assert exc.value.code == 2


def test_hot_path_imports_nothing_heavy(feature: Path) -> None:
    code = (
        "import sys; from ci_evals.main import main; code = main(['compute-stage', 'main']); "
        "print(' '.join(sorted(sys.modules)), file=sys.stderr); sys.exit(code)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=feature, capture_output=True, text=True, check=True
    )
    modules = set(result.stderr.split("\n")[-2].split())
    assert result.stdout == "2\n"
    assert "yaml" in modules  # sanity: the list is the real one
    heavy = {"pydantic", "claude_agent_sdk", "docker", "http.client", "urllib.request", "git"}
    assert not heavy & modules


# -- BASE names no commit: the fail-safe answer, a warning that cannot be missed, --strict


def test_a_base_that_names_no_commit_answers_1_with_a_warning(
    feature: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compute-stage", "mian"]) == 0
    out, err = capsys.readouterr()
    assert out == "1\n"  # fail-safe: everything runs
    warning, reason = err.splitlines()
    assert warning == (
        "ci-evals compute-stage: warning: BASE 'mian' names no commit in this clone "
        "(did you mean 'main'?); answering 1: every stage runs (--strict exits 2 instead)"
    )
    assert "\033" not in err  # not a terminal: no colour
    assert reason.startswith("ci-evals compute-stage: stage 1 (base-missing)")


@pytest.mark.parametrize("form", [[], ["--json"], ["--explain"]])
def test_strict_exits_2_when_base_names_no_commit(
    feature: Path, capsys: pytest.CaptureFixture[str], form: list[str]
) -> None:
    assert main(["compute-stage", "mian", "--strict", *form]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no answer a script could take for a real one
    assert err == (
        "ci-evals: error: BASE: BASE 'mian' names no commit in this clone (did you mean "
        "'main'?) (check the name, or fetch it; without --strict the answer is 1 (every stage))\n"
    )


def test_strict_changes_nothing_when_base_exists(
    feature: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compute-stage", "main", "--strict"]) == 0
    out, err = capsys.readouterr()
    assert out == "2\n"
    assert "warning" not in err


def test_no_near_name_no_guess(feature: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compute-stage", "zzzzzzzz"]) == 0
    assert "did you mean" not in capsys.readouterr().err


@pytest.mark.parametrize("no_color", [False, True])
def test_the_warning_is_coloured_on_a_terminal(feature: Path, no_color: bool) -> None:
    primary, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "GITHUB_ACTIONS")}
    if no_color:
        env["NO_COLOR"] = "1"
    try:
        result = subprocess.run(
            [sys.executable, "-m", "ci_evals", "compute-stage", "mian"],
            cwd=feature, env=env, stdout=subprocess.PIPE, stderr=secondary, timeout=60,
            check=False,
        )  # fmt: skip
        os.close(secondary)
        err = b""
        while True:
            try:
                data = os.read(primary, 4096)
            except OSError:  # EIO: every writer has gone
                break
            if not data:
                break
            err += data
    finally:
        os.close(primary)
    assert result.returncode == 0
    assert result.stdout == b"1\n"
    coloured = b"ci-evals compute-stage: \033[1;33mwarning:\033[0m BASE 'mian'" in err
    assert coloured is not no_color
    assert b"warning: BASE 'mian'" in err or coloured


def test_in_actions_a_missing_base_is_a_warning_annotation(
    feature: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "github_output"))
    assert main(["compute-stage", "mian"]) == 0
    out, err = capsys.readouterr()
    assert out == "1\n"  # CI keeps the fail-safe answer
    annotations = [line for line in err.splitlines() if line.startswith("::")]
    assert len(annotations) == 1
    assert annotations[0].startswith("::warning title=ci-evals compute-stage%3A 1::stage 1")
