from __future__ import annotations

from pathlib import Path

from ci_evals.github import actions as gha


def test_annotation_escapes_message_and_properties() -> None:
    line = gha.annotation("error", "50%\ndone", file="a,b:c%\n.md", line=3, title="x:y")
    assert line == "::error file=a%2Cb%3Ac%25%0A.md,line=3,title=x%3Ay::50%25%0Adone"
    # The only '::' left are the command's own two separators.
    assert line.count("::") == 2


def test_outputs_use_heredoc_for_multiline(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = gha.ActionsEnv.from_environ({"GITHUB_OUTPUT": str(out)})
    assert env is not None
    gha.write_outputs(env, {"from_stage": "3", "matches_json": '[\n{"a": 1}\n]'})
    text = out.read_text()
    lines = text.splitlines()
    assert lines[0] == "from_stage=3"
    assert lines[1].startswith("matches_json<<ghadelimiter_")
    delimiter = lines[1].split("<<", 1)[1]
    assert lines[-1] == delimiter
    assert "\n".join(lines[2:-1]) == '[\n{"a": 1}\n]'


def test_not_in_actions() -> None:
    assert gha.ActionsEnv.from_environ({}) is None


def test_summary_is_capped(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    env = gha.ActionsEnv.from_environ(
        {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    )
    assert env is not None
    gha.append_summary(env, "é" * gha.SUMMARY_LIMIT_BYTES)
    data = summary.read_bytes()
    assert len(data) <= gha.SUMMARY_LIMIT_BYTES + 1
    assert "limited to 1 MiB" in data.decode()


def test_capped_annotations_add_a_notice() -> None:
    lines = [gha.annotation("error", str(i)) for i in range(15)]
    shown = gha.capped(lines)
    assert len(shown) == 11
    assert "5 more" in shown[-1]
