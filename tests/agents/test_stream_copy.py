"""The copy of the CLI's stdout a case unit keeps (`stream.jsonl`): as it came, whole
lines only, and a last line saying it was cut once it reached its cap."""

from __future__ import annotations

from pathlib import Path

from ci_evals.agents import STREAM_CUT
from ci_evals.agents.claude import _StreamCopy


def test_the_copy_is_the_stream_until_its_cap_then_one_line_says_so(tmp_path: Path) -> None:
    path = tmp_path / "stream.jsonl"
    copy = _StreamCopy(path, limit=30)
    copy.write('{"type":"a"}\n{"ty')  # chunks split lines anywhere
    copy.write('pe":"b"}\n')
    copy.write('{"type":"c","long":"é"}\n')  # past 30 bytes: cut before this line
    copy.write('{"type":"d"}\n')
    copy.close()
    assert path.read_text() == '{"type":"a"}\n{"type":"b"}\n' + STREAM_CUT


def test_a_stream_within_its_cap_is_kept_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "stream.jsonl"
    copy = _StreamCopy(path, limit=100)
    for chunk in ('{"x":"\u2028"}\n', "not json\n", '{"y":1}'):
        copy.write(chunk)
    copy.close()
    assert path.read_text() == '{"x":"\u2028"}\nnot json\n{"y":1}'


def test_the_mark_is_a_line_of_its_own_after_a_line_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "stream.jsonl"
    copy = _StreamCopy(path, limit=20)
    copy.write('{"type":"a"}\n{"ty')
    copy.write('pe":"b"}\n')  # the line begun above does not fit
    copy.close()
    assert path.read_text() == '{"type":"a"}\n{"ty\n' + STREAM_CUT
