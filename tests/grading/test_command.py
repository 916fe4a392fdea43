from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from ci_evals.config import yaml_source
from ci_evals.errors import UserError
from ci_evals.grading.kinds.command import (
    MAX_OUTPUT_BYTES,
    CommandGrader,
    load_command_graders,
    run_command_grader,
    run_process,
)
from ci_evals.results.criteria import GraderResult

ENV = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
PY = sys.executable


def script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def grader(*argv: str, **kwargs: object) -> CommandGrader:
    return CommandGrader(id="g", argv=argv, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("code", "passed"), [(0, True), (1, False), (3, False)])
def test_exit_code_decides(tmp_path: Path, code: int, passed: bool) -> None:
    run = script(tmp_path, "check.sh", f"#!/bin/sh\necho checking $PWD\nexit {code}\n")
    result = run_command_grader(grader(str(run)), tmp_path, env=ENV)
    assert result.error is None
    [criterion] = result.criteria
    assert (criterion.id, criterion.passed, criterion.source) == ("g", passed, "command")
    assert criterion.detail.startswith(f"exit {code} in ")
    if not passed:
        assert f"output: checking {tmp_path}" in criterion.detail


def test_runs_in_cwd_with_only_the_given_environment(tmp_path: Path) -> None:
    (tmp_path / "lab").mkdir()
    probe = script(
        tmp_path,
        "probe.sh",
        '#!/bin/sh\npwd > where.txt\nenv > env.txt\n[ -z "$SECRET_TOKEN" ]\n',
    )
    os.environ["SECRET_TOKEN"] = "s3cret"
    try:
        result = run_command_grader(grader(str(probe), cwd="lab"), tmp_path)
    finally:
        del os.environ["SECRET_TOKEN"]
    assert result.criteria[0].passed
    assert (tmp_path / "lab" / "where.txt").read_text().strip() == str(tmp_path / "lab")
    env = (tmp_path / "lab" / "env.txt").read_text()
    assert "s3cret" not in env
    assert "PATH=" in env


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile, ended = tmp_path / "child.pid", tmp_path / "ended"
    # The child marks its natural end: killed, it never does (waited for, it would).
    slow = script(
        tmp_path,
        "slow.sh",
        f"#!/bin/sh\n(sleep 60; touch {ended}) &\necho $! > {pidfile}\necho started\nwait\n",
    )
    result = run_command_grader(grader(str(slow), timeout_s=1.0), tmp_path, env=ENV)
    assert not ended.exists()
    [criterion] = result.criteria
    assert not criterion.passed
    assert criterion.detail.startswith("timed out after 1s (process group killed)")
    assert "started" in criterion.detail
    child = int(pidfile.read_text())
    assert not _alive(child), "the backgrounded sleep outlived the grader"


def test_a_background_process_left_by_a_passing_command_is_ended(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    leaves = script(
        tmp_path, "leave.sh", f"#!/bin/sh\n(sleep 60 >/dev/null 2>&1 &\necho $! > {pidfile})\n"
    )
    result = run_command_grader(grader(str(leaves)), tmp_path, env=ENV)
    assert result.criteria[0].passed
    assert not _alive(int(pidfile.read_text()))


def _alive(pid: int) -> bool:
    """True if `pid` still runs 5 s on (a zombie counts as ended; SIGKILL lands async)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):  # gone, or going while read
            return False
        if status.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        time.sleep(0.05)
    return True


def test_output_is_capped_to_its_tail(tmp_path: Path) -> None:
    # ~1 MiB of output: only the last 64 KiB is kept, the end is intact.
    noisy = script(
        tmp_path,
        "noisy.py",
        f"#!{PY}\nimport sys\nfor i in range(16384): print(f'line {{i:05d}} ' + 'x' * 58)\n"
        "print('THE END')\nsys.exit(2)\n",
    )
    run = run_process([str(noisy)], tmp_path, timeout_s=30, env=ENV)
    assert run.returncode == 2
    assert len(run.output) == MAX_OUTPUT_BYTES
    assert run.dropped == 16384 * 70 + 8 - MAX_OUTPUT_BYTES
    assert run.output.endswith(b"THE END\n")
    out = tmp_path / "run" / "command.log"
    result = run_command_grader(grader(str(noisy)), tmp_path, env=ENV, output_path=out)
    assert out.stat().st_size == MAX_OUTPUT_BYTES
    assert result.raw_output is not None and result.raw_output.size == MAX_OUTPUT_BYTES
    detail = result.criteria[0].detail
    assert "bytes cut]" in detail and detail.endswith("THE END")
    assert len(detail) < 1200


def test_missing_program_is_an_error_not_a_failure(tmp_path: Path) -> None:
    result = run_command_grader(grader("no-such-program-xyz"), tmp_path, env=ENV)
    assert result.criteria == ()
    assert result.error == "cannot run no-such-program-xyz: No such file or directory"


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="mcp" tests="4">
  <testcase classname="handshake" name="initialize"/>
  <testcase classname="tools" name="list">
    <failure message="no tools returned">trace</failure>
  </testcase>
  <testcase classname="tools" name="schema"><error message="crashed&#10;second line"/></testcase>
  <testcase name="slow"><skipped/></testcase>
</testsuite></testsuites>
"""


def test_junit_sub_results(tmp_path: Path) -> None:
    writer = script(
        tmp_path,
        "tests.py",
        f"#!{PY}\nimport os\nopen(os.environ['CI_EVALS_RESULTS'] + '/report.xml', 'w')"
        f".write({JUNIT!r})\nraise SystemExit(1)\n",
    )
    result = run_command_grader(grader(str(writer), junit="report.xml"), tmp_path, env=ENV)
    assert result.error is None
    got = {c.id: (c.passed, c.score, c.advisory, c.detail) for c in result.criteria}
    assert got["g"][0] is False  # exit 1
    assert got["g/handshake.initialize"] == (True, 1.0, False, "")
    assert got["g/tools.list"] == (False, 0.0, False, "failure: no tools returned")
    assert got["g/tools.schema"] == (False, 0.0, False, "error: crashed")
    assert got["g/slow"] == (False, None, True, "skipped")


def test_json_sub_results(tmp_path: Path) -> None:
    body = '[{"name": "init", "passed": true}, {"name": "init", "passed": false, "detail": "2nd"}]'
    writer = script(tmp_path, "s.sh", f"#!/bin/sh\necho '{body}' > $CI_EVALS_RESULTS/out.json\n")
    result = run_command_grader(grader(str(writer), json_results="out.json"), tmp_path, env=ENV)
    assert [(c.id, c.passed, c.detail) for c in result.criteria] == [
        ("g", True, result.criteria[0].detail),
        ("g/init", True, ""),
        ("g/init#2", False, "2nd"),
    ]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("", "results file $CI_EVALS_RESULTS/out.json was not written"),
        ("echo '{bad' > $R/out.json", "$CI_EVALS_RESULTS/out.json is not valid JSON"),
        ("echo '[]' > $R/out.json", "$CI_EVALS_RESULTS/out.json lists no results"),
        ("echo '{\"a\": 1}' > $R/out.json", "must hold a JSON array"),
        ('echo \'[{"name": "x", "passed": "yes"}]\' > $R/out.json', "item 0 is not {name"),
    ],
)
def test_bad_results_file_after_exit_zero_is_an_error(
    tmp_path: Path, body: str, error: str
) -> None:
    writer = script(tmp_path, "w.sh", f"#!/bin/sh\nR=$CI_EVALS_RESULTS\n{body}\nexit 0\n")
    result = run_command_grader(grader(str(writer), json_results="out.json"), tmp_path, env=ENV)
    assert result.error is not None and error in result.error
    assert result.criteria[0].passed  # the exit criterion is still reported


def test_missing_results_after_a_failing_exit_is_a_failure(tmp_path: Path) -> None:
    writer = script(tmp_path, "w.sh", "#!/bin/sh\nexit 4\n")
    result = run_command_grader(grader(str(writer), junit="report.xml"), tmp_path, env=ENV)
    assert result.error is None
    assert [c.passed for c in result.criteria] == [False]


def test_a_results_file_in_the_graded_folder_is_not_believed(tmp_path: Path) -> None:
    # The agent left a results file claiming success; the command wrote none: results
    # are read from $CI_EVALS_RESULTS alone, a fresh folder the agent never had.
    (tmp_path / "out.json").write_text('[{"name": "all", "passed": true}]')
    noop = script(tmp_path, "noop.sh", "#!/bin/sh\nexit 0\n")
    result = run_command_grader(grader(str(noop), json_results="out.json"), tmp_path, env=ENV)
    assert result.error == "results file $CI_EVALS_RESULTS/out.json was not written"


def test_invalid_junit_is_an_error(tmp_path: Path) -> None:
    body = "#!/bin/sh\necho '<testsuite><testcase' > $CI_EVALS_RESULTS/r.xml\n"
    writer = script(tmp_path, "w.sh", body)
    result = run_command_grader(grader(str(writer), junit="r.xml"), tmp_path, env=ENV)
    assert result.error is not None and "not valid JUnit XML" in result.error


def test_a_grader_that_starts_the_agents_code_itself_opts_in(tmp_path: Path) -> None:
    script(tmp_path, "check.sh", '#!/bin/sh\nexec "$CI_EVALS_AS_AGENT" python3 server.py\n')
    text = "- { id: hidden, script: check.sh, isolate_agent_code: true }\n"
    text += "- { id: lint, command: [a] }\n"
    hidden, lint = load_command_graders(
        yaml_source.loads(text, "ci-evals.yaml"),
        suite_dir=tmp_path,
        plugin_dir=tmp_path,
        within=tmp_path,
    )
    assert hidden.isolate_agent_code and not lint.isolate_agent_code


def test_load_command_graders(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    (plugin / "scripts").mkdir(parents=True)
    script(plugin / "scripts", "check.sh", "#!/bin/sh\n")
    text = (
        "- { id: lint, command: [python3, -m, lint, lab/plan.json], timeout_s: 5 }\n"
        "- { id: unit, script: 'plugin:scripts/check.sh', args: [--fast], cwd: lab,"
        " junit: lab/r.xml, files: ['plugin:scripts/lib'] }\n"
    )
    (plugin / "scripts" / "lib").mkdir()
    lint, unit = load_command_graders(
        yaml_source.loads(text, "ci-evals.yaml"),
        suite_dir=tmp_path,
        plugin_dir=plugin,
        within=tmp_path,
    )
    assert lint == CommandGrader(
        id="lint", argv=("python3", "-m", "lint", "lab/plan.json"), timeout_s=5.0
    )
    assert unit.argv == (str(plugin / "scripts" / "check.sh"), "--fast")
    assert (unit.cwd, unit.junit, unit.json_results) == ("lab", "lab/r.xml", None)
    assert (unit.script_dir, unit.files) == (plugin / "scripts", ("check.sh", "lib"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- { id: x, command: 'pytest -q' }\n", "command must be a list of arguments"),
        ("- { id: x }\n", "exactly one of 'command' or 'script'"),
        ("- { command: [a] }\n", "missing required key 'id'"),
        ("- { id: x, command: [] }\n", "must not be empty"),
        ("- { id: x, command: [a], args: [b] }\n", "'args' goes with 'script'"),
        ("- { id: x, command: [a], files: [b] }\n", "'files' goes with 'script'"),
        ("- { id: x, script: t/run.sh, files: [t/nope.py] }\n", "not found"),
        ("- { id: x, script: t/run.sh, files: [plain.sh] }\n", "not inside the script's folder"),
        ("- { id: x, script: t/run.sh, files: [t] }\n", "not inside the script's folder"),
        ("- { id: x, script: t/run.sh, files: [t/.git/config] }\n", "in a .git folder"),
        ("- { id: x, script: .git/hooks/run.sh }\n", "in a .git folder"),
        ("- { id: x, script: t/run.sh, files: [t/.GIT/x.sh] }\n", "in a .git folder"),
        ("- { id: x, script: t/.Git/x.sh }\n", "in a .git folder"),
        (
            "- { id: x, command: [sh, -c, '\"$CI_EVALS_AS_AGENT\" ./server'] }\n",
            "1:3: [0]: grader 'x' uses $CI_EVALS_AS_AGENT",
        ),
        ("- { id: x, script: t/agent.sh }\n", "add isolate_agent_code: true"),
        ("- { id: x, command: [a], isolate_agent_code: 1 }\n", "isolate_agent_code"),
        ("- { id: x, script: t/run.sh, files: [t/link/x] }\n", "passes through a symbolic link"),
        ("- { id: x, script: nope.sh }\n", "script not found"),
        ("- { id: x, script: plain.sh }\n", "script is not executable"),
        ("- { id: x, command: [a], cwd: ../up }\n", "must be relative to the graded folder"),
        ("- { id: x, command: [a], junit: r.xml, json_results: r.json }\n", "either 'junit'"),
        ("- { id: x, command: [a], timeout_s: 0 }\n", "must be at least"),
        ("- { id: x, command: [a] }\n- { id: x, command: [b] }\n", "2:3: [1]: duplicate grader id"),
    ],
)
def test_load_errors(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "plain.sh").write_text("#!/bin/sh\n")
    (tmp_path / "t" / ".git").mkdir(parents=True)
    (tmp_path / "t" / ".git" / "config").write_text("[remote]\n")
    (tmp_path / "t" / "link").symlink_to(tmp_path)
    script(tmp_path / "t", "run.sh", "#!/bin/sh\n")
    script(tmp_path / "t", "agent.sh", '#!/bin/sh\nexec "$CI_EVALS_AS_AGENT" ./server\n')
    for folder in (tmp_path / ".git" / "hooks", tmp_path / "t" / ".GIT", tmp_path / "t" / ".Git"):
        folder.mkdir(parents=True)
        script(folder, "run.sh" if folder.name == "hooks" else "x.sh", "#!/bin/sh\n")
    with pytest.raises(UserError) as info:
        load_command_graders(
            yaml_source.loads(text, "ci-evals.yaml"),
            suite_dir=tmp_path,
            plugin_dir=tmp_path,
            within=tmp_path,
        )
    assert message in str(info.value)


def test_a_process_that_leaves_the_group_does_not_hang_the_grader(tmp_path: Path) -> None:
    # `setsid` escapes the process group and keeps stdout open: the grader must
    # still return (after a short drain) with the output it has.
    pidfile = tmp_path / "escaped.pid"
    escaper = script(
        tmp_path,
        "escape.py",
        f"#!{PY}\nimport subprocess\nprint('before', flush=True)\n"
        f"p = subprocess.Popen(['sleep', '30'], start_new_session=True)\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n",
    )
    try:
        # Its 20 s timeout is shorter than the escaped sleep's 30: exit 0 is the
        # grader returning when the command ended, not when the pipe closed.
        run = run_process([str(escaper)], tmp_path, timeout_s=20, env=ENV)
        assert (run.returncode, run.output) == (0, b"before\n")
    finally:
        # The sandbox's reaper kills what escaped the group when the command ends.
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pidfile.read_text()), 9)


@pytest.mark.parametrize("kind", ["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_script_sees_a_copy_of_itself_and_its_named_files_never_its_folder(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    # A `script:` next to the suite at the repository's top: its folder is the
    # repository, `.git/config` (a token in the remote URL) included. The grader's
    # sandbox gets a read-only copy of the script and of what the suite names.
    from tests.sandbox_helpers import ready_sandbox  # noqa: PLC0415

    sandbox = ready_sandbox(kind, request)
    repo, state = tmp_path / "repo", tmp_path / "state"
    (repo / ".git").mkdir(parents=True)
    (repo / "lib").mkdir()
    state.mkdir()
    (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = https://x:ghp_TOKEN@gh/r\n')
    (repo / "lib" / "expected.txt").write_text("42\n")
    (repo / "lib" / ".git").mkdir()  # a named folder is copied without its .git and links
    (repo / "lib" / ".git" / "config").write_text("url = https://x:ghp_TOKEN@gh/lib\n")
    (repo / "lib" / "up").symlink_to(repo)
    (repo / "notes.txt").write_text("not named by the suite\n")
    script(repo, "check.sh", "#!/bin/sh\n" 'here=$(dirname "$0")\n' 'ls -aR "$here"\n'
           'cat "$here/.git/config"\n' 'cp "$here/lib/expected.txt" seen.txt\n'
           'echo pwned > "$here/pwned.txt" && exit 3\n' "exit 0\n")  # fmt: skip
    [check] = load_command_graders(
        yaml_source.loads("- {id: g, script: check.sh, files: [lib]}\n", "ci-evals.yaml"),
        suite_dir=repo,
        plugin_dir=repo,
        within=repo,
    )
    log = tmp_path / "out" / "g.log"
    result = run_command_grader(check, state, env=ENV, sandbox=sandbox, output_path=log)
    assert result.error is None, result.error
    (exit_criterion,) = result.criteria
    assert exit_criterion.passed, exit_criterion.detail
    assert (state / "seen.txt").read_text() == "42\n"
    listed = log.read_text()
    assert "check.sh" in listed and "expected.txt" in listed, listed
    assert "ghp_TOKEN" not in listed and "notes.txt" not in listed, listed
    assert ".git/config: No such file" in listed, listed
    assert ".git" not in listed.split() and "up" not in listed.split(), listed
    assert not (repo / "pwned.txt").exists()


def test_a_results_link_the_agent_planted_to_a_fifo_does_not_hang_the_host(
    tmp_path: Path,
) -> None:
    # The graded folder is the agent's: `out.json -> /dev/zero` (or a FIFO) must not be
    # read on the host before the command runs — that read never ends.
    graded, fifo = tmp_path / "graded", tmp_path / "fifo"
    graded.mkdir()
    os.mkfifo(fifo)
    (graded / "out.json").symlink_to(fifo)
    noop = script(tmp_path, "noop.sh", "#!/bin/sh\nexit 0\n")
    results: list[object] = []
    worker = threading.Thread(
        target=lambda: results.append(
            run_command_grader(grader(str(noop), json_results="out.json"), graded, env=ENV)
        ),
        daemon=True,
    )
    worker.start()
    worker.join(20)
    hung = worker.is_alive()
    if hung:  # let the blocked read go before failing
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(5)
    assert not hung, "the grader hung reading the planted link on the host"
    [result] = results
    assert isinstance(result, GraderResult)
    assert result.error is not None and "out.json" in result.error
