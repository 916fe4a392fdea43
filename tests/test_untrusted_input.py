"""Untrusted readers refuse, never crash (docs/report.md, docs/github.md).

Each input here once ended in exit 3 and a traceback — in the privileged
`workflow_run` job a traceback is not a refusal. Every one must be exit 2 and
one line, through the real commands: `comment --from-artifact` (the fork's
zip: an encrypted member, a corrupt LZMA member), `baseline fetch` (a zip
holding a file `a` and `a/b/results.json`), `report` and `report --baseline`
(a 5,000-digit integer, 100,000-deep nesting in `results.json`).
tests/test_untrusted_fuzz.py looks for the next one.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from ci_evals.main import main
from ci_evals.results.model import dump_results
from tests.github.test_baseline_fetch import V2, fetch, source
from tests.github.test_comment import REPO, TOKEN, FakeGitHub, github
from tests.github.test_fork_comment import a_fork_pr, packed, post, refused, zipped
from tests.github_actions_fake import ActionsGitHub, actions_github, zip_of
from tests.report.test_report import a_run, passed_stage, scenario

__all__ = ["actions_github", "github"]  # fixtures, used by name

DEEP = 100_000
HUGE = "9" * 5_000


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("ALL_PROXY", "GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "unexpected error" not in err, err
    return lines[0]


def valid_results() -> str:
    return dump_results(a_run(scenario("acme", passed_stage(1)))).decode("utf-8")


def with_value(document: str, key: str, raw: str) -> str:
    """`document` with the value of its top-level `key` replaced by the JSON text `raw`."""
    data = json.loads(document)
    data[key] = "\0placeholder"
    return json.dumps(data).replace(json.dumps("\0placeholder"), raw)


HOSTILE = {
    "a 5,000-digit integer": with_value(valid_results(), "repeat", HUGE),
    "100,000-deep arrays": with_value(valid_results(), "scenarios", "[" * DEEP + "]" * DEEP),
    "100,000-deep objects": with_value(
        valid_results(), "summaries", '{"a":' * DEEP + "1" + "}" * DEEP
    ),
    "NaN": with_value(valid_results(), "total_cost_usd", "NaN"),
    "a float beyond range": with_value(valid_results(), "total_cost_usd", "1e999"),
    "a bare 100,000-deep array": "[" * DEEP + "]" * DEEP,
}


# ------------------------------------------------------------------ report, report --baseline


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_report_refuses_a_hostile_results_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    (tmp_path / "results.json").write_text(text, encoding="utf-8")
    code = main(["report", str(tmp_path), "--markdown", str(tmp_path / "summary.md")])
    line = one_line(capsys.readouterr().err)
    assert code == 2, line
    assert "results.json: " in line
    assert not (tmp_path / "summary.md").exists()


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_baseline_is_no_baseline_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    baseline = tmp_path / "baseline"
    baseline.mkdir()
    (baseline / "results.json").write_text(text, encoding="utf-8")
    summary = tmp_path / "summary.md"
    code = main(["report", str(V2), "--baseline", str(baseline), "--markdown", str(summary)])
    line = one_line(capsys.readouterr().err)
    assert code == 0, line  # the run itself passed; the baseline's state is said
    assert "no baseline: the baseline cannot be read: " in line
    assert "**No baseline:** the baseline cannot be read: " in summary.read_text()


def test_a_hostile_baseline_source_record_is_said_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = tmp_path / "baseline"
    baseline.mkdir()
    (baseline / "baseline-source.json").write_text("[" * DEEP + "]" * DEEP, encoding="utf-8")
    code = main(["report", str(V2), "--baseline", str(baseline), "--markdown", str(tmp_path / "s")])
    line = one_line(capsys.readouterr().err)
    assert code == 0
    assert "baseline-source.json is unreadable (nested deeper than 64 levels)" in line


# ------------------------------------------------------------------ comment --from-artifact


def patch_flags(archive: Path, name: str, flags: int) -> None:
    """Set `name`'s general-purpose flags in its local and its central header."""
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = zf.getinfo(name)
    data[info.header_offset + 6 : info.header_offset + 8] = flags.to_bytes(2, "little")
    central = data.find(b"PK\x01\x02")  # the central directory's first entry
    while central != -1:
        length = int.from_bytes(data[central + 28 : central + 30], "little")
        if data[central + 46 : central + 46 + length] == name.encode():
            data[central + 8 : central + 10] = flags.to_bytes(2, "little")
        central = data.find(b"PK\x01\x02", central + 4)
    archive.write_bytes(bytes(data))


def test_an_encrypted_member_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    archive = zipped(packed(tmp_path)) / "ci-evals-pr.zip"
    patch_flags(archive, "results.json", 0x1)
    refused(post(tmp_path, github, archive.parent), github, "entry 'results.json' is encrypted")


def test_a_corrupt_lzma_member_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    folder = tmp_path / "zipped"
    folder.mkdir()
    archive = folder / "ci-evals-pr.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(artifact / "pr.json", "pr.json", compress_type=zipfile.ZIP_DEFLATED)
        zf.write(artifact / "results.json", "results.json", compress_type=zipfile.ZIP_LZMA)
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = zf.getinfo("results.json")
    start = info.header_offset + 30 + len("results.json")
    data[start + 4 : start + 40] = b"\xff" * 36  # past LZMA's 4-byte header: its stream
    archive.write_bytes(bytes(data))
    refused(
        post(tmp_path, github, folder), github, "entry 'results.json' uses compression method 14"
    )


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_results_file_in_the_artifact_posts_nothing(
    tmp_path: Path, github: FakeGitHub, text: str
) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    (artifact / "results.json").write_text(text, encoding="utf-8")
    refused(post(tmp_path, github, artifact), github, "results.json: ")


def test_a_hostile_pr_file_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    deep = 2_000  # under pr.json's 4 KiB limit, over the interpreter's recursion limit
    (artifact / "pr.json").write_text("[" * deep + "]" * deep, encoding="utf-8")
    refused(post(tmp_path, github, artifact), github, "nested deeper than 64 levels")


# ------------------------------------------------------------------ baseline fetch


@pytest.fixture
def env(actions_github: ActionsGitHub, monkeypatch: pytest.MonkeyPatch) -> ActionsGitHub:
    monkeypatch.setenv("GITHUB_API_URL", actions_github.url)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    return actions_github


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ({"a": b"x", "a/b/results.json": V2.read_bytes()}, "entry 'a' is a file, but 'a/b/"),
        ({"a/b/results.json": V2.read_bytes(), "a": b"x"}, "entry 'a' is a file, but 'a/b/"),
        ({"results.json": V2.read_bytes(), "a": b"x", "a/": b""}, "entry 'a/' appears twice"),
    ],
    ids=["file-then-folder", "folder-then-file", "file-and-folder-entry"],
)
def test_a_baseline_zip_with_a_file_where_a_folder_goes_is_refused(
    env: ActionsGitHub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    entries: dict[str, bytes],
    why: str,
) -> None:
    env.add_artifact(env.add_run(), zip_of(entries))
    out = tmp_path / "baseline"
    code = fetch(out)
    line = one_line(capsys.readouterr().err)
    assert code == 2, line
    assert why in line
    assert not (out / "artifact").exists() and not (out / "results.json").exists()
    assert str(source(out)["reason"]).startswith("refused: ")
