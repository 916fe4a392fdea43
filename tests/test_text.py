"""`text.one_line`: whitespace folded, long lines cut with the caller's ellipsis."""

from __future__ import annotations

from ci_evals.text import one_line


def test_whitespace_runs_become_one_space() -> None:
    assert one_line("  a\n\tb \r\n c  ") == "a b c"
    assert one_line("") == ""


def test_a_line_within_the_limit_is_kept_whole() -> None:
    assert one_line("abc", 3) == "abc"


def test_a_longer_line_is_cut_to_the_limit_with_the_ellipsis() -> None:
    assert one_line("abcdefgh", 6) == "abc..."
    assert one_line("abcdefgh", 6, ellipsis="…") == "abcde…"
    assert len(one_line("x " * 400, 300)) == 300
