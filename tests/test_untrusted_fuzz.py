"""Fuzzing the untrusted readers, through the real commands: the next crash is found
here, not by a user (docs/report.md, docs/github.md).

Hypothesis writes hostile `results.json` files (valid ones with any value,
number or nesting spliced in anywhere; cut-off ones; raw bytes) and hostile
zips (any entries, compression methods and flags, bytes overwritten, cut
off) and feeds them to `report`, `report --baseline`, `comment
--from-artifact`, `baseline fetch` and `safe_extract`. Whatever the input:

- never exit 3 (a traceback is not a refusal), and a refusal is exit 2 and
  one line;
- `report`: a run it does not pass (exit 1 or 2) never has a JUnit file a
  test reporter shows green, nor a Markdown headline `passed`;
- `comment --from-artifact`: a refusal posts nothing;
- `safe_extract`: a refusal leaves nothing behind, a success nothing outside.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import warnings
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ci_evals.errors import UserError
from ci_evals.fs.walk import walk
from ci_evals.github.fork_artifact import PullRequestRef
from ci_evals.github.safe_zip import safe_extract
from ci_evals.main import main
from ci_evals.results.model import dump_results
from tests.github.test_baseline_fetch import V2
from tests.github.test_comment import PR, REPO, TOKEN, FakeGitHub, github
from tests.github.test_fork_comment import HEAD, a_fork_pr, workflow_run_event, writes
from tests.github_actions_fake import ActionsGitHub, actions_github
from tests.report.test_report import a_run, failed_stage, passed_stage, scenario, stage
from tests.test_untrusted_input import patch_flags

__all__ = ["actions_github", "github"]  # fixtures, used by name

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("ALL_PROXY", "GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


def fresh() -> tempfile.TemporaryDirectory[str]:
    """A new folder per example (`tmp_path` is one per test, not per example)."""
    return tempfile.TemporaryDirectory(prefix="ci-evals-fuzz-")


def refusal_or_verdict(code: int, err: str, *, verdicts: tuple[int, ...] = (0, 1, 2)) -> None:
    """Exit 0/1/2, never 3; at most one line on stderr, and exactly one for exit 2."""
    assert code in verdicts, err
    assert "Traceback" not in err and "unexpected error" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) <= 1, err
    if code == 2:
        assert len(lines) == 1, err


# ------------------------------------------------------------------ hostile results files

_BASES = [
    json.loads(dump_results(result))
    for result in (
        a_run(scenario("acme", passed_stage(1), passed_stage(2))),
        a_run(
            scenario("acme", passed_stage(1), failed_stage(2), stage(3, "skipped", error="x")),
            scenario("globex", stage(1, "skipped", error="the run budget is spent")),
            budget_usd=1.0,
        ),
        a_run(
            scenario("acme", passed_stage(1)), scenario("acme", passed_stage(1), repeat=1), repeat=2
        ),
        a_run(scenario("acme", passed_stage(1)), status="running"),
    )
]


def _paths(value: object, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*at, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*at, index))


_PATHS = [[p for p in _paths(base) if p] for base in _BASES]

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["passed", "failed", "error", "completed", "skipped", "running", "limit"]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

# JSON text spliced in as is: what json.dumps would never write, and what it would.
_fragments = st.one_of(
    _json_values.map(json.dumps),
    st.integers(1, 6_000).map(lambda n: "9" * n),
    st.integers(1, 3_000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 3_000).map(lambda n: '{"a":' * n + "0" + "}" * n),
    st.sampled_from(
        [
            "NaN",
            "Infinity",
            "-Infinity",
            "1e999",
            "-1e400",
            "1e308",
            "1e15",
            "9.99e14",
            "9223372036854775808",
            "-9223372036854775809",
            "9223372036854775807",
            "-0",
            "0.0",
            '"\\ud800"',
            '"\\u0000"',
            '"\\u202e"',
            '"2026-13-45T99:00:00Z"',
            '"9999-12-31T23:59:59Z"',
            '"0001-01-01T00:00:00Z"',
            "[]",
            "{}",
            "null",
            "true",
            '""',
            '"' + "x" * 70_000 + '"',
        ]
    ),
)


@st.composite
def results_texts(draw: st.DrawFn) -> str:
    """A results file: a real one with values spliced in, cut off, or raw text."""
    kind = draw(st.sampled_from(["spliced", "spliced", "spliced", "cut", "raw"]))
    index = draw(st.integers(0, len(_BASES) - 1))
    base = json.loads(json.dumps(_BASES[index]))
    if kind == "raw":
        return draw(st.text(max_size=200) | _fragments)
    if kind == "cut":
        text = json.dumps(base)
        return text[: draw(st.integers(0, len(text)))]
    raws: dict[str, str] = {}
    for n, path in enumerate(
        draw(st.lists(st.sampled_from(_PATHS[index]), min_size=1, max_size=3))
    ):
        holder: Any = base
        try:
            for part in path[:-1]:
                holder = holder[part]
            sentinel = f"\0fuzz{n}"
            if draw(st.booleans()) and isinstance(holder, dict):
                del holder[path[-1]]  # a missing field
                continue
            holder[path[-1]] = sentinel
        except (KeyError, IndexError, TypeError):
            continue  # an earlier splice replaced the way there
        raws[json.dumps(sentinel)] = draw(_fragments)
    text = json.dumps(base)
    for sentinel, raw in raws.items():
        text = text.replace(sentinel, raw)
    return text


def red(junit: Path) -> bool:
    root = ET.fromstring(junit.read_bytes())
    cases = list(root.iter("testcase"))
    return any(c.find("failure") is not None or c.find("error") is not None for c in cases)


@FUZZ
@given(text=results_texts())
def test_report_refuses_or_reports_any_results_file(
    capsys: pytest.CaptureFixture[str], text: str
) -> None:
    with fresh() as name:
        folder = Path(name)
        (folder / "results.json").write_text(text, encoding="utf-8", errors="surrogatepass")
        junit, markdown = folder / "junit.xml", folder / "summary.md"
        code = main(["report", str(folder), "--junit", str(junit), "--markdown", str(markdown)])
        err = capsys.readouterr().err
        refusal_or_verdict(code, err)
        if junit.exists() and code != 0:  # a run that did not pass never reads green
            assert red(junit), junit.read_text()
            assert not markdown.read_text(encoding="utf-8").startswith("## ci-evals: passed\n")


@FUZZ
@given(text=results_texts())
def test_a_hostile_baseline_never_crashes_the_report(
    capsys: pytest.CaptureFixture[str], text: str
) -> None:
    with fresh() as name:
        baseline = Path(name) / "baseline"
        baseline.mkdir()
        (baseline / "results.json").write_text(text, encoding="utf-8", errors="surrogatepass")
        summary = Path(name) / "summary.md"
        code = main(["report", str(V2), "--baseline", str(baseline), "--markdown", str(summary)])
        # V2 passed: a baseline changes nothing but its own section, or is refused as
        # another suite's (exit 2, one line).
        refusal_or_verdict(code, capsys.readouterr().err, verdicts=(0, 2))


# ------------------------------------------------------------------ hostile zips

_NAMES = [
    "pr.json", "results.json", "results.json", "a", "a/b", "a/b/results.json", "a/",
    "junk/x", "../x", "/abs", "results.json/", "x\\y", "",
]  # fmt: skip
_METHODS = [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]
_FLAGS = [0x1, 0x8, 0x20, 0x40, 0x800, 0xFFFF]
_GOOD_PR = PullRequestRef(PR, HEAD).as_json().encode()


@st.composite
def zips(draw: st.DrawFn, results: bytes | None = None) -> bytes:
    """A zip of hostile entries, then maybe patched flags, overwritten bytes, a cut."""
    good = results if results is not None else dump_results(_result_of(0))
    entries = [("pr.json", _GOOD_PR), ("results.json", good)]
    if draw(st.booleans()):
        entries = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(_NAMES),
                    st.sampled_from([_GOOD_PR, good, b"", b"x"]) | st.binary(max_size=64),
                ),
                max_size=5,
            )
        )
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w") as archive:
        warnings.simplefilter("ignore")  # "Duplicate name": wanted here
        for name, data in entries:
            info = zipfile.ZipInfo(name or "-")
            if draw(st.booleans()):
                info.external_attr = draw(st.integers(0, 0xFFFF)) << 16  # any mode, links too
            archive.writestr(info, data, compress_type=draw(st.sampled_from(_METHODS)))
    data = bytearray(buffer.getvalue())
    with tempfile.NamedTemporaryFile(suffix=".zip") as fh:
        if draw(st.booleans()) and entries:
            fh.write(data)
            fh.flush()
            name = draw(st.sampled_from([n or "-" for n, _ in entries]))
            with contextlib.suppress(KeyError):
                patch_flags(Path(fh.name), name, draw(st.sampled_from(_FLAGS)))
            data = bytearray(Path(fh.name).read_bytes())
    for _ in range(draw(st.integers(0, 3))):
        if data:
            at = draw(st.integers(0, len(data) - 1))
            patch = draw(st.binary(min_size=1, max_size=4))
            data[at : at + len(patch)] = patch
    if draw(st.integers(0, 4)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


def _result_of(index: int) -> Any:
    from ci_evals.results.model import RunResult  # noqa: PLC0415

    return RunResult.model_validate(_BASES[index])


@FUZZ
@given(archive=zips())
def test_safe_extract_refuses_or_unpacks_inside(archive: bytes) -> None:
    with fresh() as name:
        folder = Path(name)
        (folder / "a.zip").write_bytes(archive)
        dest = folder / "out"
        try:
            written = safe_extract(folder / "a.zip", dest)
        except UserError as exc:
            assert "\n" not in str(exc)
            assert not dest.exists()
            return
        inside = {rel for rel, kind, _ in walk(dest) if kind != "dir"}
        assert set(written) == inside
        for rel, _kind, entry in walk(dest):
            assert os.path.realpath(entry.path).startswith(os.path.realpath(dest) + os.sep), rel


@pytest.fixture
def from_artifact(
    github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> FakeGitHub:
    """The trusted workflow_run job's environment, for `main(["comment", ...])`."""
    event = tmp_path / "event.json"
    event.write_text(json.dumps(workflow_run_event()), encoding="utf-8")
    for key, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "workflow_run",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": TOKEN,
    }.items():
        monkeypatch.setenv(key, value)
    a_fork_pr(github)
    return github


@FUZZ
@given(data=st.data())
def test_comment_from_a_hostile_artifact_zip_posts_or_refuses(
    from_artifact: FakeGitHub, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    results = data.draw(results_texts()).encode("utf-8", "surrogatepass")
    if data.draw(st.booleans()):
        results = dump_results(_result_of(data.draw(st.integers(0, len(_BASES) - 1))))
    archive = data.draw(zips(results))
    before = len(writes(from_artifact))
    with fresh() as name:
        (Path(name) / "ci-evals-pr.zip").write_bytes(archive)
        code = main(["comment", "--from-artifact", name])
    err = capsys.readouterr().err
    refusal_or_verdict(code, err, verdicts=(0, 2))
    if code == 2:
        assert "not posted:" in err
        assert len(writes(from_artifact)) == before
    assert TOKEN not in err


@settings(FUZZ, max_examples=40)
@given(archive=zips(V2.read_bytes()))
def test_baseline_fetch_of_a_hostile_zip_refuses_or_fetches(
    actions_github: ActionsGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    archive: bytes,
) -> None:
    monkeypatch.setenv("GITHUB_API_URL", actions_github.url)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    actions_github.add_artifact(actions_github.add_run(), archive)  # the newest run
    with fresh() as name:
        out = Path(name) / "baseline"
        argv = ["baseline", "fetch", "--workflow", "evals.yml", "--branch", "main"]
        code = main([*argv, "--out", str(out)])
        err = capsys.readouterr().err
        refusal_or_verdict(code, err, verdicts=(0, 2))
        if code == 2:
            assert not (out / "results.json").exists()


# -- recordings (`replay:`, `record promote`): committed by a pull request ----------------

_EXCHANGE = {
    "path": "/v1/messages",
    "request_body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "status": 200,
    "response_headers": {"content-type": "application/json"},
    "response_body": "{}",
}
_SPECIAL = ["\ud800", "a\udfff", "toolu_1", "# Environment\n - OS Version: x", 10**30, 99999]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    | st.sampled_from(_SPECIAL),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=12,
)  # fmt: skip
_PLACES = [("path",), ("status",), ("response_headers",), ("response_body",), ("request_body",),
           ("request_body", "messages"), ("request_body", "messages", 0, "content"),
           ("request_body", "system"), ("truncated",)]  # fmt: skip


@st.composite
def recording_lines(draw: st.DrawFn) -> str:
    """A recorded exchange with any value (or nesting, up to 600 deep) spliced in, or a cut line."""
    exchange = json.loads(json.dumps(_EXCHANGE))
    place = draw(st.sampled_from(_PLACES))
    value = draw(st.sampled_from(_SPECIAL) | _JSON)
    for _ in range(draw(st.sampled_from([0, 0, 1, 300, 600]))):
        value = [value]
    holder: Any = exchange
    for step in place[:-1]:
        holder = holder[step]
    holder[place[-1]] = value
    line = json.dumps(exchange, ensure_ascii=draw(st.sampled_from([True, True, False])),
                      allow_nan=True)  # fmt: skip
    return line[: draw(st.integers(0, len(line)))] if draw(st.booleans()) else line


@FUZZ
@given(lines=st.lists(recording_lines(), min_size=1, max_size=3))
def test_a_hostile_recording_is_promoted_or_refused(
    capsys: pytest.CaptureFixture[str], lines: list[str]
) -> None:
    with fresh() as name:
        folder = Path(name)
        (folder / "run").mkdir()
        recording = folder / "run" / "model-exchanges.jsonl"
        recording.write_text("\n".join(lines) + "\n", errors="surrogatepass")
        code = main(["record", "promote", str(folder / "run"), "x", "--into", str(folder)])
        refusal_or_verdict(code, capsys.readouterr().err, verdicts=(0, 2))
        if code == 2:
            assert not (folder / "x").exists()  # nothing written on refusal


# ------------------------------------------------ the run folder's other JSON: links, MAC

_LINK_RECORDS = st.one_of(
    _json_values.map(lambda v: json.dumps({"links": v, "other": {}})),
    st.dictionaries(st.text(max_size=12), _json_values, max_size=4).map(
        lambda d: json.dumps({"links": d})
    ),
    st.integers(1, 100_000).map(lambda n: '{"links":' + "[" * n + "]" * n + "}"),
    _fragments,
    st.binary(max_size=64).map(lambda b: b.decode("latin-1")),
)


@FUZZ
@given(text=_LINK_RECORDS)
def test_a_hostile_record_of_links_is_read_or_refused_by_name(text: str) -> None:
    """`after.links.json` comes with a shard's artifact: `grade`, `fixtures update`, a
    grader's view read it. Nested 100,000 deep it was a RecursionError (`grade` exit 3)."""
    from ci_evals.fs.state import links_file, state_links, view_state  # noqa: PLC0415

    with fresh() as name:
        after = Path(name) / "after"
        after.mkdir()
        links_file(after).write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            links = state_links(after)
            view_state(after, Path(name) / "view")
        except UserError as exc:
            assert str(exc.file).endswith("after.links.json"), exc
            assert "\n" not in str(exc)
        else:
            assert all(isinstance(t, str) for t in links.values())
        escaped = [rel for rel, kind, _ in walk(Path(name)) if kind != "link" and "view" not in rel]
        assert sorted(escaped) == ["after", "after.links.json"]


def _special(path: Path, kind: str) -> None:
    """`path` made a FIFO, a link to /dev/zero, or a folder: no reader may wait on,
    read without end, or crash on it."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        os.symlink("/dev/zero", path)
    else:
        path.mkdir()


SPECIAL_KINDS = ["fifo", "zero", "folder"]


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_a_record_of_links_that_is_no_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    from ci_evals.fs.state import links_file, state_links  # noqa: PLC0415

    after = tmp_path / "after"
    after.mkdir()
    _special(links_file(after), kind)
    with pytest.raises(UserError, match="cannot read the record of links"):
        state_links(after)


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
@pytest.mark.parametrize("command", ["report", "grade", "merge"])
def test_a_results_file_that_is_no_regular_file_is_one_line(
    tmp_path: Path, kind: str, command: str
) -> None:
    """A FIFO made `report` wait for ever, /dev/zero read until memory ran out: each is
    refused, as a process with a deadline, in one line naming the file."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    run = tmp_path / "run"
    run.mkdir()
    _special(run / "results.json", kind)
    argv = {"report": [str(run)], "grade": [str(run)], "merge": [str(run), "--out", "m"]}
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", command, *argv[command]],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    refusal_or_verdict(done.returncode, done.stderr)
    assert "results.json: cannot read the results file" in done.stderr
    assert not (tmp_path / "m").exists()


_MACS = st.one_of(
    st.text(max_size=70),
    st.sampled_from(["é", "\u0100" * 64, "0" * 64, "A" * 64, "g" * 64, "0" * 63]),
    _json_values,
)


@FUZZ
@given(mac=_MACS, entries=_json_values, raw=st.none() | _fragments)
def test_a_hostile_shard_mac_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, mac: object,
    entries: object, raw: str | None,
) -> None:  # fmt: skip
    """`"mac": "é"` was a TypeError out of hmac.compare_digest (merge exit 3): a MAC that
    is not 64 hex digits is not this key's, and says so."""
    with fresh() as name:
        shard = Path(name) / "shard"
        shard.mkdir()
        record = {"version": 1, "entries": entries, "mac": mac}
        text = raw if raw is not None else json.dumps(record)
        (shard / "shard.mac.json").write_text(text, encoding="utf-8", errors="surrogatepass")
        monkeypatch.setenv("CI_EVALS_SHARD_KEY", "k" * 40)
        code = main(["merge", str(shard), "--out", str(Path(name) / "m")])
        refusal_or_verdict(code, capsys.readouterr().err, verdicts=(2,))
        assert not (Path(name) / "m").exists()


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_a_shard_mac_that_is_no_regular_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    _special(tmp_path / "shard.mac.json", kind)
    monkeypatch.setenv("CI_EVALS_SHARD_KEY", "k" * 40)
    code = main(["merge", str(tmp_path), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    refusal_or_verdict(code, err, verdicts=(2,))
    assert "shard.mac.json: no valid shard MAC" in err
