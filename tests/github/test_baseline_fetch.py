"""`ci-evals baseline fetch`, end to end against the stand-in GitHub REST API.

The fake (tests/github_actions_fake.py) lists workflow runs and artifacts
and redirects the zip download to a second local server, as GitHub does.
The artifacts are real zips; the results inside are real results files.
"""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest

from ci_evals.backoff import Deadline
from ci_evals.errors import UserError
from ci_evals.github.artifacts import FetchRequest, _download, fetch_baseline
from ci_evals.github.comment import CommentSettings
from ci_evals.github.safe_zip import ZipLimits, safe_extract
from ci_evals.main import main
from tests.github.test_comment import REPO, VirtualClock, deadline_policy, trickling_server
from tests.github_actions_fake import TOKEN, ActionsGitHub, actions_github, zip_of
from tests.paths import DATA

__all__ = ["actions_github"]  # the fixture, used by name

V2 = DATA / "results-v2-full.json"


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy between us and the fake; not in Actions (no step summary)."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("ALL_PROXY", "GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def env(actions_github: ActionsGitHub, monkeypatch: pytest.MonkeyPatch) -> ActionsGitHub:
    monkeypatch.setenv("GITHUB_API_URL", actions_github.url)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    return actions_github


def fetch(out: Path, *extra: str) -> int:
    argv = ["baseline", "fetch", "--workflow", "evals.yml", "--branch", "main"]
    return main([*argv, "--out", str(out), *extra])


def source(out: Path) -> dict[str, object]:
    return json.loads((out / "baseline-source.json").read_text())  # type: ignore[no-any-return]


def run_folder_zip() -> bytes:
    """What upload-artifact makes of `path: .ci-evals/run` plus `reports/`."""
    return zip_of(
        {
            ".ci-evals/run/results.json": V2.read_bytes(),
            ".ci-evals/run/acme-arm/1-research-company/trajectory.jsonl": b"{}\n",
            "reports/ci-evals.md": b"## ci-evals: passed\n",
        }
    )


def test_the_last_successful_trusted_run_with_the_artifact_is_downloaded(
    env: ActionsGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = env.add_run()
    env.add_artifact(good, run_folder_zip())
    env.add_run()  # newer, succeeded, but selected no stage: no artifact
    # Newest: a fork's pull request from its own `main` -- listed for branch=main.
    fork = env.add_run(event="pull_request", head_repository="mallory/widgets")
    env.add_artifact(fork, zip_of({"results.json": b"{}"}))
    out = tmp_path / "baseline"

    assert fetch(out) == 0

    assert (out / "results.json").read_bytes() == V2.read_bytes()
    assert (out / "artifact" / "reports" / "ci-evals.md").is_file()
    found = source(out)
    assert (found["found"], found["run_id"], found["run_number"]) == (True, good, good - 400)
    # The fork's run was never asked for its artifacts; the storage host never saw the token.
    assert f"/repos/{REPO}/actions/runs/{fork}/artifacts" not in env.paths()
    assert [r.path.split("?")[0] for r in env.storage_requests] == [
        f"/blob/{env.artifacts[good][0]['id']}"
    ]
    assert all("Authorization" not in r.headers for r in env.storage_requests)
    stdout = capsys.readouterr().out
    assert stdout.startswith(f"baseline from run #{good - 400} of evals.yml on main")
    assert TOKEN not in stdout

    # The report compares with it and says where it came from.
    summary = tmp_path / "summary.md"
    assert main(["report", str(V2), "--baseline", str(out), "--markdown", str(summary)]) == 0
    text = summary.read_text()
    sha = f"{good:040x}"[:12]
    # A SHA and `#N` as code (never GitHub references); the run's own page a link.
    assert (
        f"Baseline from run `#{good - 400}` of evals.yml on main at `{sha}` "
        f"([the run](<https://github.com/{REPO}/actions/runs/{good}>))."
    ) in text
    assert "**0 regression(s)**" in text


def test_no_successful_run_is_no_baseline_and_exit_0(
    env: ActionsGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env.add_run(conclusion="failure")
    env.add_run(branch="feature")
    env.add_run(event="pull_request")  # this repository's, but a pull request's
    out = tmp_path / "baseline"
    assert fetch(out) == 0
    reason = "no successful run of evals.yml on main (push, schedule or workflow_dispatch)"
    # the whole reason: it was once cut after "schedule or " (a string on its own statement)
    assert capsys.readouterr().out == (
        f"ci-evals baseline fetch: no baseline: {reason} (the report will say so)\n"
    )
    assert not (out / "results.json").exists()
    summary = tmp_path / "summary.md"
    assert main(["report", str(V2), "--baseline", str(out), "--markdown", str(summary)]) == 0
    escaped = reason.replace("_", "\\_")  # Markdown: workflow\_dispatch
    assert f"**No baseline:** {escaped}. Nothing to compare with;" in summary.read_text()


def test_in_actions_the_step_outputs_say_what_was_found(
    env: ActionsGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = tmp_path / "outputs"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    assert fetch(tmp_path / "none") == 0
    assert outputs.read_text() == "found=false\nresults=\n"
    run = env.add_run(event="schedule")
    env.add_artifact(run, run_folder_zip())
    outputs.unlink()
    assert fetch(tmp_path / "found") == 0
    assert outputs.read_text() == f"found=true\nresults={tmp_path / 'found' / 'results.json'}\n"


def test_runs_without_the_artifact_are_said(env: ActionsGitHub, tmp_path: Path) -> None:
    run = env.add_run()
    env.add_artifact(run, run_folder_zip(), name="something-else")
    out = tmp_path / "baseline"
    assert fetch(out) == 0
    assert "none of the last 1 successful run(s) of evals.yml on main has an artifact named" in str(
        source(out)["reason"]
    )


def test_a_zip_with_parent_entries_is_refused_and_nothing_escapes(
    env: ActionsGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = env.add_run()
    env.add_artifact(run, zip_of({"results.json": V2.read_bytes(), "../../evil.txt": b"x"}))
    out = tmp_path / "a" / "baseline"
    assert fetch(out) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "refusing the artifact: entry '../../evil.txt' would be written outside" in err
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "a" / "evil.txt").exists()
    assert not (out / "results.json").exists() and not (out / "artifact").exists()
    assert str(source(out)["reason"]).startswith("refused: ")
    summary = tmp_path / "summary.md"
    assert main(["report", str(V2), "--baseline", str(out), "--markdown", str(summary)]) == 0
    assert "**No baseline:** refused: " in summary.read_text()


def test_an_oversized_artifact_is_refused_before_the_download(
    env: ActionsGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = env.add_run()
    data = run_folder_zip()
    env.add_artifact(run, data)
    assert fetch(tmp_path / "baseline", "--max-bytes", str(len(data) - 1)) == 2
    assert f"{len(data)} bytes, over the limit of {len(data) - 1}" in capsys.readouterr().err
    assert env.storage_requests == []


def test_an_artifact_larger_than_it_declared_is_cut_off(
    env: ActionsGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = env.add_run()
    data = run_folder_zip()
    env.add_artifact(run, data, size=100)  # declares 100 bytes, serves more
    assert fetch(tmp_path / "baseline", "--max-bytes", "1000") == 2
    assert "over the limit of 1000" in capsys.readouterr().err
    assert len(env.storage_requests) == 1


def test_a_bad_token_is_one_line_without_the_token(
    env: ActionsGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_wrong")
    assert fetch(tmp_path / "baseline") == 2
    err = capsys.readouterr().err.strip()
    assert "answered 401: Bad credentials" in err and "actions: read" in err
    assert "ghs_wrong" not in err and "\n" not in err
    # Said where the report will look, too.
    assert "answered 401" in str(source(tmp_path / "baseline")["reason"])
    monkeypatch.delenv("GITHUB_TOKEN")
    assert fetch(tmp_path / "other") == 2
    assert "GITHUB_TOKEN not set" in capsys.readouterr().err


def test_a_non_empty_out_folder_is_refused(env: ActionsGitHub, tmp_path: Path) -> None:
    (tmp_path / "baseline").mkdir()
    (tmp_path / "baseline" / "results.json").write_text("{}")
    assert fetch(tmp_path / "baseline") == 2
    assert env.requests == []


# ------------------------------------------------------------------ safe_extract itself


def _entry(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = mode << 16
    return info


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("/etc/passwd", "outside the folder"),
        ("a/../../b", "outside the folder"),
        ("C:/x", "outside the folder"),
        ("a\\..\\b", "outside the folder"),
        ("a//b", "outside the folder"),
    ],
)
def test_unsafe_names_are_refused(tmp_path: Path, name: str, why: str) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_of({"ok.txt": b"ok", name: b"x"}))
    with pytest.raises(UserError, match=why):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_entry_without_a_name_is_refused_in_one_line(tmp_path: Path) -> None:
    # Found by hypothesis (test_untrusted_fuzz): zipfile's own is_dir() raised
    # IndexError on a central directory entry whose name is empty.
    data = bytearray(zip_of({"a": b"x"}))
    entry = data.index(b"PK\x01\x02")
    assert data[entry + 28 : entry + 30] == b"\x01\x00" and data[entry + 46 : entry + 47] == b"a"
    data[entry + 28 : entry + 30] = b"\x00\x00"
    del data[entry + 46]
    end = data.index(b"PK\x05\x06")
    size = int.from_bytes(data[end + 12 : end + 16], "little")
    data[end + 12 : end + 16] = (size - 1).to_bytes(4, "little")
    archive = tmp_path / "a.zip"
    archive.write_bytes(bytes(data))
    assert [info.filename for info in zipfile.ZipFile(archive).infolist()] == [""]
    with pytest.raises(UserError, match="outside the folder"):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_links_and_devices_are_refused(tmp_path: Path) -> None:
    for mode, why in ((stat.S_IFLNK | 0o777, "symbolic link"), (stat.S_IFIFO | 0o644, "plain")):
        archive = tmp_path / "a.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr(_entry("results.json", mode), "/etc/passwd")
        with pytest.raises(UserError, match=why):
            safe_extract(archive, tmp_path / "out")
        assert not (tmp_path / "out").exists()


def test_a_zip_bomb_is_stopped_at_the_limit(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_of({"big.txt": b"\0" * 5_000_000}))  # a few KiB compressed
    assert archive.stat().st_size < 50_000
    with pytest.raises(UserError, match="more than 1000000 bytes"):
        safe_extract(archive, tmp_path / "out", ZipLimits(max_bytes=1_000_000))
    with pytest.raises(UserError, match="entries, over the limit"):
        safe_extract(archive, tmp_path / "out", ZipLimits(max_entries=0))
    assert safe_extract(archive, tmp_path / "out") == ["big.txt"]


def _patched(data: bytes, at: str, offset: int, value: bytes) -> bytes:
    out = bytearray(data)
    start = out.find(at.encode("latin-1"))
    out[start + offset : start + offset + len(value)] = value
    return bytes(out)


def test_an_unsupported_or_corrupt_compression_is_refused_in_one_line(tmp_path: Path) -> None:
    """What zipfile raises for them is not BadZipFile (NotImplementedError, zlib.error):
    each must still be a refusal, not a traceback, and leave nothing behind."""
    plain = zip_of({"results.json": b"{}" * 1000})
    # Compression method 97 (WavPack) in the local and the central header.
    method = _patched(_patched(plain, "PK\x03\x04", 8, b"\x61\x00"), "PK\x01\x02", 10, b"\x61\x00")
    # A deflate stream that starts with an invalid block type.
    name = len(b"results.json")
    corrupt = _patched(plain, "PK\x03\x04", 30 + name, b"\xff\xff")
    for data, why in ((method, "compression method 97"), (corrupt, "cannot be unpacked")):
        archive = tmp_path / "a.zip"
        archive.write_bytes(data)
        with pytest.raises(UserError, match=why):
            safe_extract(archive, tmp_path / "out")
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("status", "headers"),
    [(502, {}), (429, {"Retry-After": "1"}), (403, {"Retry-After": "1"})],
)
def test_a_transient_github_error_is_retried_not_no_baseline(
    env: ActionsGitHub, tmp_path: Path, status: int, headers: dict[str, str]
) -> None:
    # Before: a single 502 or a secondary rate limit gave up at once (exit 2, no baseline).
    good = env.add_run()
    env.add_artifact(good, run_folder_zip())
    env.fail["GET"] = (status, {"message": "You have exceeded a secondary rate limit"}, headers)
    env.fail_times["GET"] = 1
    out = tmp_path / "baseline"
    assert fetch(out) == 0
    assert source(out)["found"] is True
    assert (out / "results.json").is_file()


def test_baseline_fetch_retries_within_one_overall_deadline(
    env: ActionsGitHub, tmp_path: Path
) -> None:
    # Before: every wait was bounded but not their sum with the requests.
    clock = VirtualClock()
    env.add_artifact(env.add_run(), run_folder_zip())
    env.fail["GET"] = (403, {"message": "You have exceeded a secondary rate limit"}, {})
    out = tmp_path / "baseline"
    request = FetchRequest("evals.yml", "main", out, retry=deadline_policy(clock, total_s=150.0))
    with pytest.raises(UserError, match=r"not retried: .* overall deadline of 150 s for GitHub"):
        fetch_baseline(CommentSettings.from_environ(), request)
    assert clock.waits == [60.0, 60.0]  # a secondary limit naming no wait: a minute each
    assert "overall deadline" in str(source(out)["reason"])


def test_a_trickling_artifact_download_is_cut_at_the_overall_deadline(tmp_path: Path) -> None:
    # Each read came within its timeout, so `read(n)` waited for n bytes for ever.
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
    cut = r"download was cut: the overall deadline of 1 s"
    with trickling_server(head, b"P", every=0.1) as url, pytest.raises(UserError, match=cut):
        _download(
            f"{url}/zip", TOKEN, url, tmp_path / "a.zip",
            max_bytes=10**6, timeout=30.0, deadline=Deadline(1.0),
        )  # fmt: skip
