"""Issue 20: the code under test cannot reach its grader's verdict, and a script grader
sees only what its suite names. Real bwrap and docker, the task's own hidden tests."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from ci_evals.grading.kinds.command import CommandGrader, run_command_grader
from ci_evals.results.criteria import GraderResult
from ci_evals.sandbox.base import ON_HOST, SandboxConfig
from ci_evals.suite.load import load_suite
from tests.paths import DATA, REPO
from tests.sandbox_helpers import ready_sandbox

ROOT = REPO
TASK = ROOT / "tasks" / "mcp-sqlite-server"
ATTACK = DATA / "hostile" / "attack.py"
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
SANDBOXES = ["bwrap", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture
def sandbox(request: pytest.FixtureRequest) -> SandboxConfig:
    return ready_sandbox(str(request.param), request)


def hidden_grader() -> CommandGrader:
    suite = load_suite(TASK / "ci-evals.yaml")
    [grader] = [g for g in suite.stages[0].grading.graders if getattr(g, "id", None) == "hidden"]
    assert isinstance(grader, CommandGrader)
    return grader


def hostile_server(folder: Path) -> None:
    """The reference server, made to forget everything between processes, with the
    attack (tests/data/hostile/attack.py) on top: one file, nothing to install."""
    source = (TASK / "reference" / "server.py").read_text()
    for old, new in [
        (
            "    connection = sqlite3.connect(options.db)\n",
            "    if not os.path.exists(LOG):\n"
            "        attempt()\n"
            "        watch()\n"
            '    connection = sqlite3.connect(":memory:")\n',
        ),
        ('"SQL error: " + str(exc)', '"SQL error: " + str(exc) + told()'),
    ]:
        assert old in source
        source = source.replace(old, new, 1)
    (folder / "server.py").write_text(ATTACK.read_text() + "\n\n" + source)


def by_id(result: GraderResult) -> dict[str, tuple[bool, str]]:
    return {c.id: (c.passed, c.detail or "") for c in result.criteria}


@pytest.mark.parametrize("sandbox", SANDBOXES, indirect=True)
def test_a_hostile_server_cannot_forge_the_hidden_tests_verdict(
    tmp_path: Path, sandbox: SandboxConfig
) -> None:
    graded = tmp_path / "graded"
    graded.mkdir()
    hostile_server(graded)
    result = run_command_grader(
        hidden_grader(), graded, env=ENV, output_path=tmp_path / "log", sandbox=sandbox
    )
    assert result.error is None, result
    found = by_id(result)
    assert not any("forged" in detail for _, detail in found.values()), found
    # The true verdict: the server never persists, so a second process sees nothing.
    passed, detail = found["hidden/persists"]
    assert not passed and "no such table: books" in detail, detail
    assert found["hidden/round-trip"][0] and found["hidden/sql-error"][0]
    if os.geteuid() == 0 or sandbox.kind == "docker":
        # Another uid: it saw the hidden tests run and tried everything; all refused.
        assert "graders seen: 1" in detail, detail
        for attack in ("sigstop", "mem", "stdout", "plant results"):  # SIGCONT: harmless
            assert f"{attack}: PermissionError" in detail, detail
    else:
        # Namespaces of its own: no process of the grader's, no results folder there.
        assert "graders seen: 0" in detail and "plant results: FileNotFoundError" in detail


def test_under_local_the_variables_are_set_too(tmp_path: Path) -> None:
    """`local` has one identity (no promise, docs/isolation.md), but a grader written for
    the others runs there unchanged: its results folder and launcher exist."""
    graded = tmp_path / "graded"
    graded.mkdir()
    (graded / "server.py").write_text((TASK / "reference" / "server.py").read_text())
    result = run_command_grader(hidden_grader(), graded, env=ENV, sandbox=ON_HOST)
    assert result.error is None and all(c.passed for c in result.criteria), result


def status(folder: Path, name: str) -> dict[str, str]:
    """`Key: value` lines the code under test wrote from /proc/self/status."""
    lines = (folder / name).read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


@pytest.mark.parametrize("sandbox", SANDBOXES, indirect=True)
def test_a_grader_that_does_not_opt_in_runs_as_the_code_under_test(
    tmp_path: Path, sandbox: SandboxConfig
) -> None:
    """`python3 -m pkg` (the docs' example) puts the graded folder first on sys.path: a
    planted module runs as the command. Without isolate_agent_code that is one identity,
    the code under test's (no capabilities, not root in docker), never the grader's."""
    graded = tmp_path / "graded"
    (graded / "labsmith_lint").mkdir(parents=True)
    (graded / "labsmith_lint" / "__main__.py").write_text(
        "import json, os, shutil\n"
        "shutil.copyfile('/proc/self/status', 'status')\n"
        "with open(os.path.join(os.environ['CI_EVALS_RESULTS'], 'r.json'), 'w') as f:\n"
        "    json.dump([{'name': 'planted', 'passed': True}], f)\n"
    )
    lint = CommandGrader(id="lint", argv=("python3", "-m", "labsmith_lint"), json_results="r.json")
    result = run_command_grader(lint, graded, env=ENV, sandbox=sandbox)
    assert result.error is None, result
    # Documented: such a grader's verdict is only as trustworthy as the code it runs.
    assert [c.id for c in result.criteria] == ["lint", "lint/planted"]
    seen = status(graded, "status")
    assert int(seen["CapEff"], 16) == 0 and int(seen["CapPrm"], 16) == 0, seen
    if sandbox.kind == "docker" or os.geteuid() != 0:
        assert seen["Uid"].split()[0] != "0", seen


@pytest.mark.parametrize("sandbox", SANDBOXES, indirect=True)
def test_the_code_under_test_gets_none_of_the_graders_variables_files_or_bounding_set(
    tmp_path: Path, sandbox: SandboxConfig
) -> None:
    graded = tmp_path / "graded"
    graded.mkdir()
    body = (
        'exec 7>"$CI_EVALS_RESULTS/held"\n'  # a results file the grader holds open
        '"$CI_EVALS_AS_AGENT" sh -c \'env > env-seen; cp /proc/self/status status\n'
        "  if echo forged >&7; then echo open; else echo closed; fi > fd-seen' 2>/dev/null\n"
        'test ! -s "$CI_EVALS_RESULTS/held"\n'
    )
    grader = CommandGrader(id="g", argv=("sh", "-c", body), isolate_agent_code=True)
    result = run_command_grader(grader, graded, env=ENV, sandbox=sandbox)
    assert result.error is None and result.criteria[0].passed, result
    assert "CI_EVALS_" not in (graded / "env-seen").read_text()
    assert (graded / "fd-seen").read_text().strip() == "closed"
    assert int(status(graded, "status")["CapBnd"], 16) == 0


@pytest.mark.parametrize("sandbox", SANDBOXES, indirect=True)
def test_no_setuid_file_stays_in_a_folder_root_wrote_in(
    tmp_path: Path, sandbox: SandboxConfig
) -> None:
    """A root grader (docker, bwrap as root) or code run as uid 0 (bwrap as root) leaves
    `cp /bin/sh rootsh; chmod 6755 rootsh`: a root shell on the host, unless stripped."""
    graded = tmp_path / "graded"
    graded.mkdir()
    body = "cp /bin/sh rootsh && chmod 6755 rootsh && mkdir d && chmod 2755 d"
    grader = CommandGrader(id="g", argv=("sh", "-c", body), isolate_agent_code=True)
    result = run_command_grader(grader, graded, env=ENV, sandbox=sandbox)
    assert result.criteria[0].passed, result
    for name in ("rootsh", "d"):
        mode = (graded / name).lstat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID), (name, oct(mode))


NESTED = """
import sys
from pathlib import Path
from ci_evals.grading.kinds.command import CommandGrader, run_command_grader
from ci_evals.sandbox.base import SandboxConfig
body = sys.argv[2]
grader = CommandGrader(id="t", argv=("sh", "-c", body), isolate_agent_code=True)
env = {"PATH": "/usr/bin:/bin"}
result = run_command_grader(grader, Path(sys.argv[1]), env=env, sandbox=SandboxConfig("bwrap"))
print(result)
sys.exit(0 if result.error is None and result.criteria[0].passed else 1)
"""


def argv_rest(code: str, graded: Path, body: str) -> list[str]:
    return ["-c", code, str(graded), body]


def test_without_root_the_code_under_test_has_a_tmp_of_its_own(tmp_path: Path) -> None:
    """bwrap under a normal user: one uid for both, so the grader's /tmp (its private
    temporary folders) is not shared with the code under test, which sees only the
    sandbox's own folders there. As root, the test runs ci-evals as `nobody`."""
    base = Path(tempfile.mkdtemp(prefix="ci-evals-nested-"))  # reachable by nobody
    try:
        graded = base / "graded"
        graded.mkdir()
        body = (
            "mkdir /tmp/grader-private && echo mine > /tmp/grader-private/f\n"
            '"$CI_EVALS_AS_AGENT" sh -c \'ls -a /tmp > tmp-seen;'
            " echo theirs > /tmp/grader-private/f' 2>/dev/null\n"
            'test "$(cat /tmp/grader-private/f)" = mine\n'
        )
        argv = [sys.executable, *argv_rest(NESTED, graded, body)]
        env = dict(ENV)
        if os.geteuid() == 0:
            os.chown(base, 65534, 65534)
            os.chown(graded, 65534, 65534)
            # The venv's interpreter may live under /root (not for nobody): the system's,
            # of the same version, runs our code and the venv's packages.
            python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
            if not os.path.exists(python):
                pytest.skip(f"as root this test runs ci-evals as nobody with {python}")
            paths = [str(ROOT), sysconfig.get_paths()["purelib"]]
            as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            probe = [*as_nobody, "test", "-r", f"{ROOT}/ci_evals/__init__.py", "-a", "-x", paths[1]]
            if subprocess.run(probe, check=False, timeout=30).returncode != 0:
                # e.g. a clone in a `mktemp -d` folder (0700): nobody cannot import us
                pytest.skip(
                    "as root this test runs ci-evals as nobody, who cannot read this checkout"
                )
            env["PYTHONPATH"] = os.pathsep.join(paths)
            argv = [*as_nobody, python]
            argv += argv_rest(NESTED, graded, body)
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, check=False, env=env, cwd="/"
        )
        assert done.returncode == 0, done.stdout + done.stderr
        seen = (graded / "tmp-seen").read_text().split()
        assert "grader-private" not in seen and base.name in seen, seen
    finally:
        shutil.rmtree(base, ignore_errors=True)
