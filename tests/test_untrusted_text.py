"""Untrusted text stays text in a GitHub Actions log (docs/github.md).

A results file is the pull request's (a fork's, in the privileged `workflow_run`
job) and holds what the agent wrote. Whatever ci-evals prints from it must never
be a workflow command. The oracle is `runner_commands`: the commands the Actions
runner would act on in a stream, read the way its `ActionCommandManager` reads
them — a line that starts (after leading spaces) with `::NAME`, or holds
`##[NAME` anywhere (the older syntax), none while `::stop-commands::TOKEN` is in
force until `::TOKEN::`.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from ci_evals.errors import UserError, error_handler
from ci_evals.github.actions import ActionsEnv, commands_stopped
from ci_evals.results.model import write_results
from ci_evals.run.progress import summary_table
from ci_evals.text import inert
from tests.github.test_comment import FakeGitHub, github
from tests.github.test_fork_comment import HEAD, a_fork_pr, ci_evals, post, pull_request_event
from tests.report.test_report import a_run, failed_stage, passed_stage, scenario, stage

__all__ = ["github"]

# What the runner registers (actions/runner, src/Runner.Worker/*CommandExtension*).
REGISTERED = {
    "add-mask",
    "add-matcher",
    "add-path",
    "debug",
    "echo",
    "endgroup",
    "error",
    "group",
    "notice",
    "remove-matcher",
    "save-state",
    "set-env",
    "set-output",
    "warning",
}
HOSTILE = (
    "acme\n::add-mask::secret\n  ::set-output name=verdict::passed "
    "##[set-env name=NODE_OPTIONS]--require=/tmp/x ::error::fake \u202eevil"
)


def _command(line: str, extra: set[str]) -> str | None:
    names = REGISTERED | {"stop-commands"} | extra
    stripped = line.lstrip()
    if stripped.startswith("::"):
        end = stripped.find("::", 2)
        if end >= 0:
            name = stripped[2:end].split(" ")[0]
            if name.lower() in names:
                return name.lower()
    start = line.find("##[")
    if start >= 0 and (end := line.find("]", start)) >= 0:
        name = line[start + 3 : end].split(" ", maxsplit=1)[0]
        if name.lower() in names:
            return name.lower()
    return None


def runner_commands(stream: str) -> list[str]:
    """The workflow commands the runner would act on in `stream`, in order."""
    found: list[str] = []
    token: str | None = None
    for line in stream.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        name = _command(line, set() if token is None else {token.lower()})
        if name is None:
            continue
        if token is not None:
            if name == token.lower():
                token = None
            continue
        if name == "stop-commands":
            token = line.lstrip()[len("::stop-commands::") :]
            continue
        found.append(name)
    return found


def tampered(sid: str = HOSTILE) -> object:
    """A run whose file contradicts itself (a stage passed, its verdict failed) and whose
    scenario id and reason carry workflow commands."""
    lying = failed_stage(4, reason="nope\n::add-mask::x ##[error]planted")
    lying.status = "passed"
    return a_run(scenario(sid, passed_stage(3), lying, stage(5, "error", error=HOSTILE)))


def fork_comment(
    tmp_path: Path, github: FakeGitHub, result: object
) -> subprocess.CompletedProcess[str]:
    """The fork path with `result` as the fork's run: packed, then posted by the trusted job."""
    a_fork_pr(github)
    run_dir = tmp_path / "run"
    write_results(run_dir, result)  # type: ignore[arg-type]
    artifact = tmp_path / "artifact"
    packed = ci_evals(
        tmp_path,
        ["comment", "--pack", str(run_dir), "--out", str(artifact)],
        "pull_request",
        pull_request_event(sha=HEAD),
    )
    assert packed.returncode == 0, packed.stderr
    done = post(tmp_path, github, artifact)
    assert done.returncode == 0, done.stderr
    return done  # type: ignore[no-any-return]


def actions_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return env | {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}


# ------------------------------------------------------------------ the oracle itself


def test_the_oracle_reads_commands_as_the_runner_does() -> None:
    assert runner_commands("::add-mask::x\n  ::error::y\nsay ##[set-output name=a]b") == [
        "add-mask",
        "error",
        "set-output",
    ]
    assert runner_commands("a ::add-mask::x\n::unknown::y") == []
    assert runner_commands("::stop-commands::t1\n::add-mask::x\n::t1::\n::error::y") == ["error"]


# ------------------------------------------------------------------ the one function


def test_inert_keeps_plain_text_and_shows_every_trick() -> None:
    assert inert("acme stage 3 (plan): 4 != 3") == "acme stage 3 (plan): 4 != 3"
    assert inert("a\nb\r\tc\x1b[31m") == "a\\nb\\r\\tc\\x1b[31m"
    assert inert("x\u202ey\u200bz\u2028") == "x\\u202ey\\u200bz\\u2028"
    assert inert("::add-mask::x") == ":\\x3aadd-mask:\\x3ax"
    assert inert("say ##[error]x") == "say \\x23\\x23[error]x"


@pytest.mark.parametrize(
    "text",
    [
        HOSTILE,
        ":::::\n:::",
        "#\ufe0f#[add-mask]x",  # a variation selector .NET's culture-aware IndexOf skips
        ":\u034f:add-mask::x",  # a combining grapheme joiner, likewise
        "\u2029::error::x\u0085::warning::y",
    ],
)
def test_inert_text_is_never_a_command_nor_two_lines(text: str) -> None:
    line = inert(text)
    assert len(line.splitlines()) == 1
    assert runner_commands(line) == []
    assert "::" not in line and "##[" not in line
    assert not any(c in line for c in "\ufe0f\u034f") or "#\ufe0f#" not in line


def test_a_user_error_is_one_inert_line() -> None:
    error = UserError("unknown scenario 'a\n::add-mask::x ##[error]y'", field="scenario")
    assert runner_commands(f"ci-evals: error: {error}") == []


def test_the_top_level_handler_prints_one_inert_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A bug's message may quote the input (a validator's error does): inert too."""
    for error in (UserError("bad id 'a\n::add-mask::x'"), ValueError("a\n::add-mask::x")):
        with error_handler() as code:
            raise error
        assert code[0] in (2, 3)
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and runner_commands(err) == [], err
        if "traceback in " in err:  # the bug's log: ours to remove
            Path(err.rsplit("traceback in ", 1)[1].rstrip().rstrip(")")).unlink()


def test_commands_are_stopped_around_untrusted_output(capsys: pytest.CaptureFixture[str]) -> None:
    env = ActionsEnv.from_environ({"GITHUB_ACTIONS": "true"})
    with commands_stopped(env):
        print("::add-mask::x\n::error::y")
    print("::notice::ours")
    out = capsys.readouterr().out
    assert runner_commands(out) == ["notice"]
    lines = out.splitlines()
    token = lines[0].removeprefix("::stop-commands::")
    assert len(token) >= 32 and lines[3] == f"::{token}::"
    with commands_stopped(None):  # not in Actions: nothing added
        print("plain")
    assert capsys.readouterr().out == "plain\n"


# ------------------------------------------------------------------ the commands


def test_comment_from_a_fork_artifact_prints_no_command(tmp_path: Path, github: FakeGitHub) -> None:
    """The privileged job: the fork's scenario id and reasons reach stderr only inert."""
    done = fork_comment(tmp_path, github, tampered())
    assert "results.json is inconsistent: acme\\n:\\x3aadd-mask:\\x3asecret" in done.stderr
    assert runner_commands(done.stderr) == []
    assert runner_commands(done.stdout) == []
    assert len(github.comments) == 1


def test_report_prints_only_its_own_escaped_annotations(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_results(run_dir, tampered())  # type: ignore[arg-type]
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", "report", str(run_dir)],
        env=actions_env(tmp_path),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "## ci-evals: error" in done.stdout  # the summary, inside stop-commands
    assert runner_commands(done.stdout) == []
    # One error for the inconsistency, one for stage 5 (4 claims a pass): nothing else.
    assert runner_commands(done.stderr) == ["error", "error"]
    assert "results file is inconsistent (1 problem(s)" in done.stderr
    # Redirected to a file, the summary is not the log: no markers in the Markdown.
    with (tmp_path / "summary-out.md").open("w") as out:
        subprocess.run(
            [sys.executable, "-m", "ci_evals", "report", str(run_dir)],
            env=actions_env(tmp_path),
            stdout=out,
            check=False,
            timeout=60,
        )
    written = (tmp_path / "summary-out.md").read_text()
    assert written.startswith("## ci-evals: error") and "stop-commands" not in written


def test_the_run_summary_table_is_inert() -> None:
    table = summary_table(tampered())  # type: ignore[arg-type]
    assert runner_commands(table) == []
    # header, rule, 3 stages, what `mean -` means (a stage shows -), total
    assert len(table.splitlines()) == 2 + 3 + 1 + 1


# ------------------------------------------------------------------ the PR comment

# GitHub's autolinked references (docs.github.com, "Autolinked references and URLs"),
# looked for in the text a reader sees: code spans removed (GitHub links nothing in
# code), entities decoded (GitHub links the rendered text, not the source).
_AUTOLINKED = re.compile(
    r"(?:https?|ftp)://\S+|www\.\S+"
    r"|[\w.-]+/[\w.-]+(?:#\d+|@[0-9a-f]{7,40})"
    r"|\bGH-\d+|(?<!\w)#\d+"
    r"|(?<!\w)@[A-Za-z0-9][A-Za-z0-9-]*"
    r"|\b[0-9a-f]{7,40}\b",
    re.IGNORECASE,
)
AGENT_REASON = (
    "fixes #1 and GH-2 like owner/repo#3, cc @alice @org/team, see "
    "https://github.com/o/r/issues/4 or www.example.com, commit a5c3785ed8d6 "
    "(owner/repo@a5c3785), bidi x\u202ey and zero\u200bwidth #\u200b5 \u2066"
)


def autolinked(markdown: str) -> list[str]:
    outside_code = re.sub(r"`[^`\n]*`", " ", markdown)
    return _AUTOLINKED.findall(html.unescape(outside_code))


def test_agent_text_in_the_comment_links_mentions_and_references_nothing(
    tmp_path: Path, github: FakeGitHub
) -> None:
    reviewer = failed_stage(4, reason=AGENT_REASON)
    fork_comment(tmp_path, github, a_run(scenario("acme @bob #6", passed_stage(3), reviewer)))
    (comment,) = github.comments
    body = comment["body"]
    assert "### Not passed" in body and "`#1`" in body and "`@alice`" in body
    assert autolinked(body) == [], autolinked(body)
    assert not any(unicodedata.category(char) == "Cf" for char in body)
    assert "`https://github.com/o/r/issues/4`" in body and "xy and zerowidth `#5`" in body


def test_the_oracle_sees_what_github_would_link() -> None:
    assert autolinked(AGENT_REASON.replace("\u200b", "")) == [
        "#1",
        "GH-2",
        "owner/repo#3",
        "@alice",
        "@org",
        "https://github.com/o/r/issues/4",
        "www.example.com,",
        "a5c3785ed8d6",
        "owner/repo@a5c3785",
        "#5",
    ]
    assert autolinked("`#1` `@x` a@b.com acme#2") == []
    assert autolinked("&#64;x") == ["@x"]  # an entity is decoded before GitHub links


def test_ci_evals_own_run_link_stays_a_link() -> None:
    from ci_evals.report.baseline import NoBaseline  # noqa: PLC0415
    from ci_evals.report.baseline_markdown import comparison_section  # noqa: PLC0415

    url = "https://github.com/acme/widgets/actions/runs/501"
    section = comparison_section(
        NoBaseline("none"), f"Baseline from run #101 of evals.yml on main ({url})."
    )
    assert f"([the run](<{url}>))." in section and "run `#101` of" in section
