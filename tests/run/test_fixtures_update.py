"""`ci-evals fixtures update`: a passing run's stage becomes its fixture; a failed one,
or a run of another revision, does not. Real runs of the labsmith example on the stub."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ci_evals.fs.digest import file_sha256, tree_sha256
from ci_evals.fs.state import links_file
from ci_evals.main import main
from ci_evals.results.model import FileChange, RunResult, ScenarioResult, StageResult, write_results
from tests.conftest import EXAMPLE, ExampleLayout
from tests.report.test_report import criterion, finished, verdict

CHAPTERS = Path("fixtures/4-plan-chapter-output/lab/chapters")


@pytest.fixture
def example(labsmith: ExampleLayout) -> ExampleLayout:
    return labsmith


def _run(example: ExampleLayout, out: Path, script: str, *args: str) -> int:
    argv = [sys.executable, "-m", "ci_evals", "run", "--suite", str(example.suite)]
    argv += ["--model", example.model(script), "--out", str(out), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    return done.returncode


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def _update(capsys: pytest.CaptureFixture[str], run: Path, *args: str) -> tuple[int, str, str]:
    code = main(["fixtures", "update", "--from", str(run), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_a_passing_stage_is_promoted_and_the_fixtures_hold(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert _run(example, run, "labsmith.yaml", "--from-stage", "4", "--scenario", "acme-arm") == 0
    # Fixture 4 went stale: one plan edited by hand, one plan of a chapter that is gone.
    # (After the run: the stub writes its plans from these very files.)
    chapter = example.root / CHAPTERS / "02-pick-and-place.md"
    chapter.write_text(chapter.read_text() + "\nA note nobody should keep.\n")
    stale = example.root / CHAPTERS / "04-old-chapter.md"
    shutil.copy(example.root / CHAPTERS / "03-safety-zones.md", stale)

    # A run of another suite revision is refused unless told.
    suite = example.suite
    written = suite.read_text()
    suite.write_text(written.replace("budget_usd: 5.0", "budget_usd: 6.0"))
    code, _, err = _update(capsys, run, "--stage", "4")
    assert code == 2
    assert "ci-evals.yaml changed since the run" in err
    assert "pass --force to promote it anyway" in err
    suite.write_text(written)

    code, out, _ = _update(capsys, run, "--stage", "plan-chapter", "--dry-run")
    assert code == 0
    assert "  changed  lab/chapters/02-pick-and-place.md" in out
    assert "  removed  lab/chapters/04-old-chapter.md" in out
    assert "0 added, 1 changed, 1 removed" in out
    assert stale.exists()

    code, out, _ = _update(capsys, run, "--stage", "4")
    assert code == 0, out
    assert "updated fixtures/4-plan-chapter-output; the fixtures hold every contract" in out
    # The fixture is now exactly what the stage wrote (the stub writes the curated plans).
    fixture = CHAPTERS.parent.parent
    assert _files(example.root / fixture) == _files(EXAMPLE.root / fixture)
    assert not [p for p in example.fixtures.iterdir() if p.name.startswith(".")]
    assert main(["check-fixtures", "--suite", "ci-evals.yaml", "--contracts-only"]) == 0
    capsys.readouterr()

    # A broken contract is a criterion of its own: re-grading the saved run under a
    # contract that asks for one more heading fails stage 4 on exactly that field.
    suite.write_text(written.replace('"## Check", "## Pitfalls"] }', '"## Check", "## Pitfalls", "## Summary"] }'))  # fmt: skip  # noqa: E501
    regraded = tmp_path / "regraded.json"
    assert main(["grade", str(run), "--reviewer", "reuse", "--output", str(regraded)]) == 1
    stages = json.loads(regraded.read_text())["scenarios"][0]["stages"]
    plan = next(s for s in stages if s["number"] == 4)
    failed = [
        (g["grader"], c)
        for g in plan["grading"]["graders"]
        for c in g["criteria"]
        if not c["passed"]
    ]
    assert (plan["status"], [(g, c["id"]) for g, c in failed]) == (
        "failed",
        [("contract", "contract:produces[0].headings")],
    )
    assert "lab/chapters/01-connect-and-home.md: missing '## Summary'" in failed[0][1]["detail"]


@pytest.mark.slow
def test_a_failed_stage_is_refused(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    before = _files(example.fixtures)
    assert (
        _run(example, run, "broken-plan.yaml", "--from-stage", "3", "--scenario", "acme-arm") == 1
    )

    code, _, err = _update(capsys, run, "--stage", "3")
    assert code == 2
    assert "stage 3 (plan-lab) of scenario 'acme-arm' ended failed" in err
    assert "only a stage whose graders passed becomes a fixture" in err
    code, _, err = _update(capsys, run, "--stage", "4")
    assert (code, "stage 4 (plan-chapter) of scenario 'acme-arm' ended skipped" in err) == (2, True)
    assert _files(example.fixtures) == before

    # The failed stage's `status` edited to `passed`, its grading left as it was.
    results = run / "results.json"
    data = json.loads(results.read_text())
    plan = data["scenarios"][0]["stages"][0]
    assert (plan["number"], plan["status"], plan["grading"]["verdict"]) == (3, "failed", "failed")
    plan["status"] = "passed"
    results.write_text(json.dumps(data))
    code, _, err = _update(capsys, run, "--stage", "3")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "the results file is inconsistent" in err
    assert "acme-arm stage 3 (plan-lab): is passed but its verdict is failed" in err
    assert _files(example.fixtures) == before


def test_a_run_that_recorded_no_revision_is_refused_unless_forced(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A results file from before the revision was recorded: nothing proves it is of
    this suite and plugin."""
    run = tmp_path / "run"
    run.mkdir()
    graded = verdict("failed", "checklist failed", criterion("chapter_count", False))
    stage = StageResult(
        number=4, name="plan-chapter", status="failed", error="checklist failed", grading=graded
    )
    result = RunResult(
        run_id="old",
        tool_version="0",
        started_at=datetime.now(timezone.utc),
        finished_at=datetime.now(timezone.utc),
        status="completed",
        from_stage=4,
        suite_file=str(example.suite),
        scenarios=[ScenarioResult(id="acme-arm", stages=[stage])],
    )
    write_results(run, finished(result))

    code, _, err = _update(capsys, run, "--stage", "4")
    assert code == 2
    assert "the run did not record its suite and plugin revision" in err
    # Forced past that, the stage's own verdict still decides.
    code, out, err = _update(capsys, run, "--stage", "4", "--force")
    assert code == 2
    assert "warning: the run did not record its suite and plugin revision (--force)" in out
    assert "stage 4 (plan-chapter) of scenario 'acme-arm' ended failed: checklist failed" in err


PASSED = verdict("passed", "all passed", criterion("headings", True))


def _recorded_run(
    example: ExampleLayout,
    run: Path,
    produced: list[FileChange],
    status: str = "passed",
    grading: object = PASSED,
) -> Path:
    """A results file, consistent unless told otherwise, that says stage 1 of acme-arm
    passed with `produced`, recording this suite's and plugin's revision; its saved state
    is today's fixture 1 (it holds the contract). Returns the saved state folder."""
    state = run / "acme-arm" / "1-research-company" / "after"
    shutil.copytree(example.fixtures / "1-research-company-output", state)
    stage = StageResult(
        number=1,
        name="research-company",
        status=status,  # type: ignore[arg-type]
        produced=produced,
        grading=grading,  # type: ignore[arg-type]
    )
    result = RunResult(
        run_id="tampered",
        tool_version="0",
        started_at=datetime.now(timezone.utc),
        finished_at=datetime.now(timezone.utc),
        status="completed",
        from_stage=1,
        suite_file=str(example.suite),
        suite_sha256=file_sha256(example.suite),
        plugin_sha256=tree_sha256(example.plugin),
        scenarios=[ScenarioResult(id="acme-arm", stages=[stage])],
    )
    write_results(run, finished(result))
    return state


def _record_links(state: Path, links: dict[str, str]) -> None:
    """The links a saved state recorded beside it, as `save_state` writes them."""
    links_file(state).write_text(json.dumps({"links": links, "other": {}}))


def _change(path: str, content: bytes, kind: str = "file", target: str | None = None) -> FileChange:
    digest = hashlib.sha256(content).hexdigest()
    return FileChange(
        path=path, change="added", kind=kind, sha256=digest, size=len(content), target=target
    )


def test_a_status_edited_to_passed_over_a_failed_verdict_is_not_promoted(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stage's own grading says failed; only its `status` was edited: `report`
    calls that file inconsistent, and so must the promotion (docs/report.md)."""
    run = tmp_path / "run"
    company = example.fixtures / "1-research-company-output" / "research" / "company.md"
    failed = verdict("failed", "checklist failed", criterion("chapter_count", False))
    _recorded_run(example, run, [_change("research/company.md", b"edited\n")], grading=failed)
    (run / "acme-arm" / "1-research-company" / "after" / "research" / "company.md").write_bytes(
        b"edited\n"
    )
    before = _files(example.fixtures)
    code, out, err = _update(capsys, run, "--stage", "1")
    assert code == 2, out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "the results file is inconsistent" in lines[0]
    assert "acme-arm stage 1 (research-company): is passed but its verdict is failed" in lines[0]
    assert company.read_bytes() != b"edited\n"
    assert _files(example.fixtures) == before
    # --force is for another revision, never for a file that contradicts itself.
    assert _update(capsys, run, "--stage", "1", "--force")[0] == 2
    assert _files(example.fixtures) == before


@pytest.mark.parametrize("path", ["../../../planted.md", "/tmp/ci-evals-planted-abs.md"])
def test_a_recorded_path_outside_the_saved_state_is_refused(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    """results.json is data: a produced path that climbs out of the saved state (or is
    absolute) must neither be read from outside it nor written outside the fixture."""
    run = tmp_path / "run"
    company = example.fixtures / "1-research-company-output" / "research" / "company.md"
    text = b"planted\n"
    state = _recorded_run(
        example, run, [_change("research/company.md", company.read_bytes()), _change(path, text)]
    )
    source = Path(os.path.normpath(state / path))
    source.write_bytes(text)
    before = _files(example.fixtures)
    try:
        code, _, err = _update(capsys, run, "--stage", "1", "--scenario", "acme-arm")
        assert code == 2
        assert "not a path inside the stage's saved state" in err
        assert not (tmp_path / "planted.md").exists() or path.startswith("/")
        assert _files(example.fixtures) == before
    finally:
        source.unlink()


@pytest.mark.parametrize(
    ("target", "message"),
    [("/etc/passwd", "points outside"), ("../../../../etc/passwd", "points outside")],
)
def test_a_link_out_of_the_workspace_is_not_promoted(
    example: ExampleLayout,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target: str,
    message: str,
) -> None:
    """A fixture is committed and copied into every later workspace: a link the agent
    left pointing out of its workspace must not become one."""
    run = tmp_path / "run"
    company = example.fixtures / "1-research-company-output" / "research" / "company.md"
    state = _recorded_run(
        example,
        run,
        [
            _change("research/company.md", company.read_bytes()),
            _change("research/notes.md", b"", kind="link", target=target),
        ],
    )
    _record_links(state, {"research/notes.md": target})
    before = _files(example.fixtures)
    code, _, err = _update(capsys, run, "--stage", "1", "--scenario", "acme-arm")
    assert code == 2
    assert message in err
    assert _files(example.fixtures) == before


def test_a_recorded_link_that_is_missing_is_one_line(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    company = example.fixtures / "1-research-company-output" / "research" / "company.md"
    _recorded_run(
        example,
        run,
        [
            _change("research/company.md", company.read_bytes()),
            _change("research/gone.md", b"", kind="link", target="company.md"),
        ],
    )
    code, _, err = _update(capsys, run, "--stage", "1", "--scenario", "acme-arm")
    assert code == 2
    assert "is not the link the run recorded" in err
    assert "Traceback" not in err


def test_a_link_the_stage_made_inside_the_workspace_is_promoted_as_a_link(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The saved state holds no link, only its record (the run folder is uploaded, and
    an uploader follows links); promoted, the recorded link becomes a link again, as
    written, when it points inside the workspace. A link planted in `after/` itself
    (not recorded) is not one the run made: refused."""
    run = tmp_path / "run"
    company = example.fixtures / "1-research-company-output" / "research" / "company.md"
    link = _change("research/latest.md", b"", kind="link", target="company.md")
    state = _recorded_run(
        example, run, [_change("research/company.md", company.read_bytes()), link]
    )
    os.symlink("company.md", state / "research" / "latest.md")
    code, _, err = _update(capsys, run, "--stage", "1", "--scenario", "acme-arm")
    assert (code, "is not the link the run recorded" in err) == (2, True)

    os.unlink(state / "research" / "latest.md")
    _record_links(state, {"research/latest.md": "company.md"})
    code, out, err = _update(capsys, run, "--stage", "1", "--scenario", "acme-arm")
    assert code == 0, err
    assert "  added    research/latest.md" in out
    fixture = example.fixtures / "1-research-company-output" / "research"
    assert os.readlink(fixture / "latest.md") == "company.md"


def test_a_promotion_the_later_fixtures_cannot_be_laid_over_is_rolled_back(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check after the swap can itself refuse (a file of the new fixture 1 where
    fixture 3 has a folder): the old fixture must come back and no temporary folder stay."""
    run = tmp_path / "run"
    company = example.fixtures / "1-research-company-output" / "research" / "company.md"
    state = _recorded_run(
        example,
        run,
        [_change("research/company.md", company.read_bytes()), _change("lab", b"a file\n")],
    )
    (state / "lab").write_bytes(b"a file\n")
    before = _files(example.fixtures)
    code, _, err = _update(capsys, run, "--stage", "1", "--scenario", "acme-arm")
    assert code == 2
    assert "replaces a file of an earlier one" in err
    assert _files(example.fixtures) == before
    assert not [p.name for p in (example.fixtures).iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "planted",
    [".git/config", "research/.git/config", "research/sub/.GIT/config", "research/.git"],
)
def test_a_repository_the_agent_planted_is_not_promoted(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    """A `.git` the agent wrote (a workspace's top in a scenario without `git: true`, or
    any folder below it in one with) is recorded as output like any file. Promoted, it
    becomes a repository inside the user's: `git add -A` there stages it as an embedded
    repository (its files never committed) and every later `git status` of the user's
    repository runs that repository's `core.fsmonitor` on the user's machine. No fixture
    may hold one (git: true scenarios already refuse such a fixture on load)."""
    run = tmp_path / "run"
    company = example.fixtures / "1-research-company-output" / "research" / "company.md"
    config = b"[core]\n\tfsmonitor = touch /tmp/ci-evals-planted-fsmonitor; false\n"
    kind, target = ("link", "company.md") if planted.endswith(".git") else ("file", None)
    state = _recorded_run(
        example,
        run,
        [
            _change("research/company.md", company.read_bytes()),
            _change(planted, config, kind=kind, target=target),
        ],
    )
    (state / planted).parent.mkdir(parents=True, exist_ok=True)
    if kind == "link":
        _record_links(state, {planted: "company.md"})
    else:
        (state / planted).write_bytes(config)
    before = _files(example.fixtures)
    code, _, err = _update(capsys, run, "--stage", "1", "--scenario", "acme-arm")
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"{planted} is inside a .git folder (or is one)" in lines[0]
    assert _files(example.fixtures) == before
    assert not [p for p in example.fixtures.rglob("*") if p.name.lower() == ".git"]


def _planted(top: Path, name: str) -> list[Path]:
    """Every `name` under `top`, links not followed."""
    return [Path(d) / name for d, _, files in os.walk(top) if name in files]


@pytest.mark.parametrize(
    ("links", "file_first", "message"),
    [
        # Each link stays inside read alone; `a` resolved through `y` is three folders up.
        (
            {"s1/s2/s3/s4/y": "../../../..", "a": "s1/s2/s3/s4/y/../../.."},
            False,
            "which points outside the workspace by way of other links",
        ),
        ({"d": ".", "a": "d/.."}, False, "which points outside the workspace by way of other"),
        # The file named first: its folder `a` is a recorded link, whatever it points at.
        ({"d": ".", "a": "d/.."}, True, "inside 'a', which the run recorded as a link"),
        ({"a": "research"}, True, "inside 'a', which the run recorded as a link"),
    ],
)
def test_a_record_of_links_that_leads_out_writes_nothing_outside_the_fixture(
    example: ExampleLayout,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    links: dict[str, str],
    file_first: bool,
    message: str,
) -> None:
    """A crafted run folder, its results file and record of links agreeing: links made
    first and the file written through them put `a/PWNED` outside the repository (the
    review's repro). Each link is resolved through the others, a path through a recorded
    link is refused, and the new fixture is written by descriptor, links last."""
    run = tmp_path / "run"
    company = example.fixtures / "1-research-company-output" / "research" / "company.md"
    payload = b"echo pwned-by-fixture-update\n"
    made = [_change(rel, b"", kind="link", target=target) for rel, target in links.items()]
    planted = _change("a/PWNED", payload)
    produced = [planted, *made] if file_first else [*made, planted]
    state = _recorded_run(
        example, run, [_change("research/company.md", company.read_bytes()), *produced]
    )
    (state / "a").mkdir()
    (state / "a" / "PWNED").write_bytes(payload)
    _record_links(state, links)
    before = _files(example.fixtures)
    code, out, err = _update(capsys, run, "--stage", "1", "--scenario", "acme-arm")
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert message in lines[0]
    assert _files(example.fixtures) == before
    assert _planted(tmp_path, "PWNED") == [state / "a" / "PWNED"]
    assert not [p for p in example.fixtures.iterdir() if p.name.startswith(".")]
