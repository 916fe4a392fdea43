"""config.yaml_source: syntax errors point at a place inside the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals.config.yaml_source import load, loads
from ci_evals.errors import UserError


def _error(text: str) -> str:
    with pytest.raises(UserError) as info:
        loads(text, "ci-evals.yaml")
    return str(info.value)


def test_an_error_on_the_last_line_names_that_line(tmp_path: Path) -> None:
    # 42 lines, the last one unfinished: the parser's mark is on line 43.
    lines = [f"key{i}: {i}" for i in range(41)] + ["last: [1, 2"]
    path = tmp_path / "ci-evals.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(UserError) as info:
        load(path, "ci-evals.yaml")
    assert info.value.line == 42
    assert str(info.value) == (
        "ci-evals.yaml:42:12: YAML syntax error: did not find expected ',' or ']' at the end "
        "of the file (while parsing a flow sequence at 42:7)"
    )


@pytest.mark.parametrize("ending", ["", "\n", "\n\n\n", "\n   \n"])
def test_trailing_blank_lines_do_not_move_the_position(ending: str) -> None:
    message = _error('a: 1\nb: "open' + ending)
    assert message.startswith("ci-evals.yaml:2:")
    assert "while scanning a quoted scalar at 2:4" in message


def test_an_error_inside_the_file_keeps_the_parsers_position() -> None:
    assert _error("a: 1\n  b: 2\nc: 3\n") == (
        "ci-evals.yaml:2:4: YAML syntax error: mapping values are not allowed in this context"
    )


def test_every_reported_line_exists() -> None:
    for text in ("a: [\n", "a: {b\n\n", "- x\n- [y\n", "a: 'x\n", "a: |\n  x\n b: ["):
        with pytest.raises(UserError) as info:
            loads(text, "f")
        line = info.value.line
        assert line is not None and 1 <= line <= len(text.splitlines()), (text, str(info.value))
