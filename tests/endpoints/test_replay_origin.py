"""A replay says what its recording came from, in every report (docs/replay.md,
*What a replay is evidence of*).

Real runs: the stub model recorded with `--record`, or the real-API path through
the forwarding proxy against a stand-in upstream server; promoted with `record
promote`; replayed with `--model replay:DIR`; reported by `ci-evals report` to
Markdown, JUnit, the HTML site and the sticky comment, posted to a local HTTP
server playing GitHub's REST API.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, loads_script
from ci_evals.main import main
from ci_evals.results.model import ReplayedFrom, read_results, write_results
from tests.endpoints.test_replay_run import GOOD_LINE
from tests.github.test_comment import FakeGitHub, _on_a_pull_request, github
from tests.run.test_real_api_path import REAL_KEY
from tests.run.test_run_command import base_env, ci_evals
from tests.run_helpers import make_suite

__all__ = ["github"]  # the stand-in GitHub server fixture

STUB_LABEL = "replayed stub model: a wiring check, not a model verdict"
UNKNOWN_LABEL = "replayed, origin unknown: not a model verdict"


@dataclass
class Reports:
    """What `ci-evals report --comment` wrote and posted about one run folder."""

    code: int
    headline: str  # the Markdown summary's line under `## ci-evals: ...`
    junit: dict[str, str]  # the first suite's properties
    html: str  # the site's index page
    comment: str  # the sticky comment's body, as GitHub received it
    warnings: list[str]  # the step's warning annotations (workflow commands)


def _reports(
    tmp_path: Path,
    run_dir: Path,
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Reports:
    out = tmp_path / "reports"
    _on_a_pull_request(github, tmp_path, monkeypatch)
    capsys.readouterr()
    code = main(["report", str(run_dir), "--comment", "--markdown", str(out / "s.md"),
                 "--junit", str(out / "junit.xml"), "--html", str(out / "site")])  # fmt: skip
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("::warning")]
    markdown = (out / "s.md").read_text()
    suite = ET.fromstring((out / "junit.xml").read_bytes()).find("testsuite")
    assert suite is not None
    properties = {p.attrib["name"]: p.attrib["value"] for p in suite.iter("property")}
    (comment,) = github.comments
    return Reports(
        code=code,
        headline=markdown.splitlines()[2],
        junit=properties,
        html=(out / "site" / "index.html").read_text(),
        comment=comment["body"],
        warnings=warnings,
    )


def _record_on_the_stub(tmp_path: Path) -> tuple[Path, Path, tuple[str, ...]]:
    """A stub run of stages 4-5 recorded: (its run folder, the stub script, run arguments)."""
    suite, stub = make_suite(tmp_path)
    common = ("--suite", str(suite), "--from-stage", "4")
    recorded = tmp_path / "recorded"
    proc = ci_evals("run", *common, "--model", f"stub:{stub}", "--record", "--out", str(recorded),
                    cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "(stub model: a wiring check, not a model verdict)" in proc.stdout
    return recorded, stub, common


@pytest.mark.slow
def test_a_replayed_stub_recording_is_a_wiring_check_in_every_report(
    tmp_path: Path,
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A stub run's verdict is a wiring check; promoted and replayed it read as a
    plain `passed`, a model's verdict, in the headline, JUnit and the comment."""
    recorded, stub, common = _record_on_the_stub(tmp_path)
    day = read_results(recorded).started_at.date()
    proc = ci_evals("record", "promote", str(recorded), "kept", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    copy = tmp_path / "recordings" / "kept"
    assert json.loads((copy / "results.json").read_text()) == {
        "model": None,
        "model_endpoint": "stub",
        "started_at": day.isoformat(),  # the day alone: not when someone worked
    }
    stub.unlink()  # every answer comes from the recording
    replayed = tmp_path / "replayed"
    proc = ci_evals("run", *common, "--model", f"replay:{copy}", "--out", str(replayed),
                    cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"run completed ({STUB_LABEL})" in proc.stdout
    result = read_results(replayed)
    assert result.replayed_from == ReplayedFrom(origin="stub", recorded_on=day)

    reports = _reports(tmp_path, replayed, github, monkeypatch, capsys)

    assert reports.code == 0
    assert reports.headline.endswith(f"(replayed: recorded usage, $0 spent); run {result.run_id} "
                                     f"({STUB_LABEL})")  # fmt: skip
    assert reports.headline in reports.comment
    assert reports.junit["origin_note"] == STUB_LABEL
    assert (reports.junit["replayed_from"], reports.junit["recorded_on"]) == ("stub", str(day))
    assert f'<div class="note caveat"><p><b>{STUB_LABEL}</b></p></div>' in reports.html
    assert reports.warnings == [f"::warning title=ci-evals%3A replayed recording::{STUB_LABEL}"]


@pytest.mark.slow
@pytest.mark.parametrize("beside", ["nothing", "a results.json naming no known endpoint"])
def test_a_replay_of_unknown_origin_is_never_a_model_verdict(
    tmp_path: Path,
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    beside: str,
) -> None:
    """A bare model-exchanges.jsonl, or a results.json that names no endpoint ci-evals
    knows: nothing says what answered, so nothing reads as a model's verdict."""
    recorded, stub, common = _record_on_the_stub(tmp_path)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "model-exchanges.jsonl").write_bytes((recorded / "model-exchanges.jsonl").read_bytes())
    if beside != "nothing":
        (bare / "results.json").write_text(
            json.dumps({"model_endpoint": "<b>claude-opus-9</b> verified", "model": None})
        )
    stub.unlink()
    replayed = tmp_path / "replayed"
    proc = ci_evals("run", *common, "--model", f"replay:{bare}", "--out", str(replayed),
                    cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert read_results(replayed).replayed_from == ReplayedFrom(origin="unknown")

    reports = _reports(tmp_path, replayed, github, monkeypatch, capsys)

    assert reports.headline.endswith(f"({UNKNOWN_LABEL})")
    assert reports.headline in reports.comment
    assert reports.junit["origin_note"] == UNKNOWN_LABEL
    assert reports.junit["replayed_from"] == "unknown"
    assert UNKNOWN_LABEL in reports.html
    assert "claude-opus-9" not in reports.comment + reports.html  # its claim is not repeated


@pytest.mark.slow
def test_a_replayed_real_model_recording_names_its_model_and_day(
    tmp_path: Path,
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Recorded through the forwarding proxy from a stand-in upstream (the real-API
    path, offline), promoted, then replayed with no key: the reports say whose
    recorded answers these are, and when, not a fresh verdict of that model."""
    suite, _ = make_suite(tmp_path)
    script = "rules:\n  - match: {command: demo:s5}\n    turns:\n      - text: done\n"
    recorded = tmp_path / "recorded"
    with StubServer(loads_script(script)) as api:
        env = base_env(
            ANTHROPIC_API_KEY=REAL_KEY, ANTHROPIC_BASE_URL=api.cli_env()["ANTHROPIC_BASE_URL"]
        )
        proc = ci_evals("run", "--suite", str(suite), "--model", "claude-test", "--from-stage",
                        "5", "--record", "--out", str(recorded), cwd=tmp_path,
                        env=env)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert api.requests, "the stand-in API saw no request"
    assert read_results(recorded).model_endpoint == "anthropic"
    day = read_results(recorded).started_at.date()
    proc = ci_evals("record", "promote", str(recorded), "real", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    copy = tmp_path / "recordings" / "real"
    assert json.loads((copy / "results.json").read_text()) == {
        "model": "claude-test",
        "model_endpoint": "anthropic",
        "started_at": day.isoformat(),
    }
    replayed = tmp_path / "replayed"
    proc = ci_evals("run", "--suite", str(suite), "--from-stage", "5", "--model",
                    f"replay:{copy}", "--out", str(replayed), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = read_results(replayed)
    assert result.replayed_from == ReplayedFrom(
        origin="anthropic", model="claude-test", recorded_on=day
    )
    label = f"replayed from a recording of claude-test ({day}): not a fresh model verdict"

    reports = _reports(tmp_path, replayed, github, monkeypatch, capsys)

    assert reports.code == 0
    assert reports.headline.endswith(f"({label})")
    assert reports.headline in reports.comment
    assert reports.junit["origin_note"] == label
    assert (reports.junit["replayed_from"], reports.junit["replayed_model"]) == (
        "anthropic",
        "claude-test",
    )
    assert label in reports.html
    assert reports.warnings == [f"::warning title=ci-evals%3A replayed recording::{label}"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"model": "claude\u001b[2J"}, "model: the recorded model is not a model id"),
        ({"model": "claude sonnet"}, "model: the recorded model is not a model id"),
        ({"model": "m" * 201}, "model: the recorded model is 201 characters, over 200"),
        ({"model": ["claude"]}, "model: the recorded model is not text"),
        ({"started_at": "last tuesday"}, "started_at: the recorded run's start is not an ISO"),
    ],
)
def test_a_recorded_origin_that_is_no_model_id_or_date_is_one_line_and_exit_2(
    tmp_path: Path, fields: dict[str, object], expected: str
) -> None:
    """The recording's results.json is committed by a pull request: its model is asked
    for again and shown in every report, so it must be a plain bounded id."""
    suite, _ = make_suite(tmp_path)
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "model-exchanges.jsonl").write_text(GOOD_LINE)
    (rec / "results.json").write_text(json.dumps({"model_endpoint": "anthropic", **fields}))
    for command in (("run", "--suite", str(suite), "--model", "replay:rec"),
                    ("record", "promote", "rec", "kept")):  # fmt: skip
        proc = ci_evals(*command, cwd=tmp_path, timeout=60)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith("ci-evals: error: rec/results.json: ") and expected in lines[0]
    assert not (tmp_path / ".ci-evals").exists() and not (tmp_path / "recordings").exists()


def test_promote_keeps_only_a_known_endpoint_kind_and_the_day(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "model-exchanges.jsonl").write_text(GOOD_LINE)
    (rec / "results.json").write_text(json.dumps({
        "model_endpoint": "<img src=x onerror=alert(1)>", "model": "claude-x",
        "started_at": "2026-12-05T13:49:02.123456Z", "run_id": "r", "session_id": "s",
    }))  # fmt: skip
    proc = ci_evals("record", "promote", "rec", "kept", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    kept = json.loads((tmp_path / "recordings" / "kept" / "results.json").read_text())
    assert kept == {"model": "claude-x", "model_endpoint": None, "started_at": "2026-12-05"}
    assert date.fromisoformat(kept["started_at"]) == date(2026, 12, 5)


def test_a_recorded_model_is_text_in_every_report(tmp_path: Path) -> None:
    """A model id may hold what Markdown reads as markup (`_`, `[`, `@`): the label
    shows it as text, in the headline, JUnit and the site."""
    from tests.report.test_report import a_run, passed_stage, scenario  # noqa: PLC0415

    model = "claude-3-5_sonnet@20240620[1m]"
    result = a_run(
        scenario("acme", passed_stage(1)),
        model_endpoint="replay:recordings/x",
        replayed_from=ReplayedFrom(origin="anthropic", model=model, recorded_on=date(2026, 12, 5)),
    )
    out = tmp_path / "out"
    run_dir = tmp_path / "run"
    write_results(run_dir, result)
    assert main(["report", str(run_dir), "--markdown", str(out / "s.md"),
                 "--junit", str(out / "j.xml"), "--html", str(out / "site")]) == 0  # fmt: skip
    headline = (out / "s.md").read_text().splitlines()[2]
    assert headline.endswith(
        "(replayed from a recording of claude-3-5\\_sonnet&#64;`20240620`\\[1m\\] (2026-12-05): "
        "not a fresh model verdict)"
    )
    junit = ET.fromstring((out / "j.xml").read_bytes())
    notes = [p.attrib["value"] for p in junit.iter("property") if p.attrib["name"] == "origin_note"]
    label = f"replayed from a recording of {model} (2026-12-05): not a fresh model verdict"
    assert notes == [label]
    assert f"<b>{label}</b>" in (out / "site" / "index.html").read_text()
