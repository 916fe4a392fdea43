"""`sandbox: docker` in a suite, end to end on the real engine: `image:` names a recipe,
the command builds (or finds) the image, and a command grader runs inside the container."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.main import main
from ci_evals.sandbox.base import SandboxOptions
from ci_evals.sandbox.docker import engine
from ci_evals.sandbox.docker.kind import DockerOptions
from ci_evals.suite.load import load_suite
from tests.docker_helpers import containers
from tests.paths import DATA

pytestmark = pytest.mark.docker

# Run by the command grader inside the sandbox: where it is, who it is and who the
# code it starts through $CI_EVALS_AS_AGENT is, and whether it can reach anything;
# exit 1 when any of that is wrong.
PROBE = textwrap.dedent(
    """
    import json, os, socket, subprocess, sys
    agent = subprocess.check_output([os.environ["CI_EVALS_AS_AGENT"], "id", "-u"])
    facts = {"cwd": os.getcwd(), "uid": os.getuid(), "agent_uid": int(agent),
             "plan": open("plan.txt").read()}
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=2)
        facts["network"] = True
    except OSError:
        facts["network"] = False
    print(json.dumps(facts))
    sys.exit(0 if facts["cwd"].startswith("/workspace") and facts["agent_uid"] != 0
             and not facts["network"] else 1)
    """
)


def make_suite(root: Path, *, extra: str = "sandbox: {kind: docker, image: python-mcp}\n") -> Path:
    (root / "plugin" / ".claude-plugin").mkdir(parents=True)
    (root / "plugin" / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "p"}))
    (root / "fixtures" / "1-build-output").mkdir(parents=True)
    (root / "fixtures" / "1-build-output" / "plan.txt").write_text("the plan\n")
    (root / "probe.py").write_text(PROBE)
    suite = root / "ci-evals.yaml"
    suite.write_text(
        "version: 1\nplugin: plugin\nstage_map: null\n"
        + extra
        + textwrap.dedent(
            """
            stages:
              - name: build
                prompt: build it
                graders:
                  - id: probe
                    command: [python3, -c, {probe}]
                    isolate_agent_code: true
            """
        ).format(probe=json.dumps(PROBE))
    )
    return suite


def test_a_command_grader_runs_in_the_suites_image(
    tmp_path: Path, docker_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = make_suite(tmp_path)
    out = tmp_path / "out"
    code = main(["check-fixtures", "--suite", str(suite), "--no-reviewer", "--out", str(out)])
    said = capsys.readouterr()
    assert code == 0, said
    logs = list(out.rglob("command-probe.log"))
    assert logs, list(out.rglob("*"))
    facts = json.loads(logs[0].read_text().strip().splitlines()[-1])
    # The grader is root inside (a few capabilities, to start and stop the code under
    # test); what it starts as the agent is the image's `sandbox` user.
    assert facts == {
        "cwd": facts["cwd"], "uid": 0, "agent_uid": 10001, "plan": "the plan\n", "network": False
    }  # fmt: skip
    assert facts["cwd"].startswith("/workspace")


def test_without_an_engine_the_command_stops_in_one_line_never_runs_on_the_host(
    tmp_path: Path,
) -> None:
    suite = make_suite(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci_evals",
            "check-fixtures",
            "--suite",
            str(suite),
            "--no-reviewer",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"},
        check=False,
    )
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot start the docker sandbox" in lines[0], done.stderr
    assert not list((tmp_path / "out").rglob("command-probe.log"))  # nothing ran


def test_docker_without_an_image_or_network_elsewhere_is_one_line(tmp_path: Path) -> None:
    bare = make_suite(tmp_path / "a", extra="sandbox: docker\n")
    with pytest.raises(UserError, match="the docker sandbox needs an image") as caught:
        load_suite(bare)
    assert str(caught.value).startswith(f"{bare}:4:10: sandbox: "), caught.value
    assert "sandbox: {kind: docker, image: RECIPE}" in str(caught.value)
    bwrap = make_suite(tmp_path / "b", extra="sandbox: {kind: bwrap, network: true}\n")
    with pytest.raises(UserError, match="unknown key 'network'") as caught:
        load_suite(bwrap)
    assert str(caught.value).startswith(f"{bwrap}:4:24: sandbox.network: "), caught.value
    with pytest.raises(UserError, match="no image recipe 'nope'"):
        load_suite(make_suite(tmp_path / "c", extra="sandbox: {kind: docker, image: nope}\n"))
    suite = load_suite(
        make_suite(
            tmp_path / "d", extra="sandbox: {kind: docker, image: python-mcp, network: true}\n"
        )
    )
    options = suite.sandbox.options
    assert isinstance(options, DockerOptions) and suite.sandbox.kind == "docker"
    assert options.network and options.recipe is not None and options.recipe.name == "recipe.yaml"


def test_the_old_top_level_image_and_network_load_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = make_suite(tmp_path, extra="sandbox: docker\nimage: python-mcp\nnetwork: true\n")
    suite = load_suite(old)
    assert suite.sandbox.options == DockerOptions(
        network=True,
        recipe=suite.sandbox.options.recipe,  # type: ignore[attr-defined]
    )
    warning = capsys.readouterr().err.strip().splitlines()
    assert warning == [
        f"ci-evals: warning: {old}:5: top-level image: python-mcp, network: true is the old "
        "form; write sandbox: {kind: docker, image: python-mcp, network: true}"
    ]
    with pytest.raises(UserError, match="both configure the sandbox"):
        load_suite(
            make_suite(
                tmp_path / "both", extra="sandbox: {kind: docker, image: x}\nnetwork: true\n"
            )
        )


# The image for `--isolation docker` in a suite that runs in bwrap by default: the
# form before the seams merge (top-level `image:`) and the form its warning advises.
OLD_IMAGE = "image: python-mcp\nnetwork: true\n"
NEW_IMAGE = "sandbox: {kind: bwrap, docker: {image: python-mcp, network: true}}\n"


def test_the_old_top_level_image_is_dockers_beside_the_default_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = make_suite(tmp_path / "old", extra=OLD_IMAGE)
    suite = load_suite(old)
    assert suite.sandbox.kind == "bwrap" and suite.sandbox.options == SandboxOptions()
    [docker] = suite.sandbox_options.values()
    assert isinstance(docker, DockerOptions) and docker.network
    assert docker.recipe is not None and docker.recipe.parent.name == "python-mcp"
    warning = capsys.readouterr().err.strip().splitlines()
    assert warning == [
        f"ci-evals: warning: {old}:4: top-level image: python-mcp, network: true is the old "
        "form; write sandbox: {kind: bwrap, docker: {image: python-mcp, network: true}}"
    ]
    # What the warning says to write loads the same, and silently.
    new = load_suite(make_suite(tmp_path / "new", extra=NEW_IMAGE))
    assert capsys.readouterr().err == ""
    assert (new.sandbox, new.sandbox_options) == (suite.sandbox, suite.sandbox_options)


@pytest.mark.parametrize("extra", [OLD_IMAGE, NEW_IMAGE], ids=["old-form", "new-form"])
def test_isolation_docker_runs_in_the_image_the_suite_gives_docker(
    tmp_path: Path, docker_image: str, extra: str, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = make_suite(tmp_path, extra=extra)
    argv = ["check-fixtures", "--suite", str(suite), "--no-reviewer", "--isolation", "docker"]
    code = main([*argv, "--out", str(tmp_path / "out")])
    said = capsys.readouterr()
    # The probe fails (exit 1) on the network docker: gives it: it ran in the container.
    assert code == 1, said
    [log] = (tmp_path / "out").rglob("command-probe.log")
    facts = json.loads(log.read_text().strip().splitlines()[-1])
    assert facts["cwd"].startswith("/workspace") and facts["network"] is True, facts
    assert facts["agent_uid"] == 10001, facts  # the image's `sandbox` user


def test_isolation_docker_without_an_image_in_the_suite_says_where_to_give_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = make_suite(tmp_path, extra="sandbox: bwrap\n")
    argv = ["check-fixtures", "--suite", str(suite), "--no-reviewer", "--isolation", "docker"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--isolation docker: the docker sandbox needs an image" in line, line
    assert line.endswith("or, for --isolation, sandbox: {kind: bwrap, docker: {...}})"), line


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "sandbox: {kind: bwrap, dockr: {image: python-mcp}}\n",
            ":4:24: sandbox.dockr: unknown key 'dockr': neither an option of sandbox bwrap nor "
            "a sandbox kind (known keys: kind; sandbox kinds: local, bwrap, docker",
        ),
        (
            "sandbox: {kind: bwrap, docker: {imag: python-mcp}}\n",
            ":4:33: sandbox.docker.imag: unknown key 'imag' (known keys: image, kind, network)",
        ),
        (
            "sandbox: {kind: bwrap, docker: {}}\n",
            ":4:24: sandbox.docker: missing required key 'image'",
        ),
        (
            "sandbox: {kind: bwrap, docker: python-mcp}\n",
            ":4:32: sandbox.docker: expected a mapping (sandbox docker's options), got",
        ),
        (
            "sandbox: {kind: docker, image: python-mcp, docker: {network: true}}\n",
            ":4:44: sandbox.docker: names the suite's own kind, whose options sit beside kind:",
        ),
        (
            "sandbox: {kind: bwrap, docker: {image: python-mcp}}\nimage: python-mcp\n",
            ":5:8: image: and sandbox: {kind: ...} both configure the sandbox",
        ),
    ],
)
def test_a_bad_block_for_another_kind_is_one_line_at_its_key(
    tmp_path: Path, extra: str, expected: str
) -> None:
    suite = make_suite(tmp_path, extra=extra)
    with pytest.raises(UserError) as caught:
        load_suite(suite)
    assert str(caught.value).startswith(f"{suite}{expected}"), caught.value


# `python -m ci_evals` with Ctrl-C's default meaning, as from a terminal: a test
# runner started as a shell's background job passes SIGINT on ignored.
AS_FROM_A_TERMINAL = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'ci-evals'; runpy.run_module('ci_evals', run_name='__main__')"
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_cli_removes_the_container_it_runs_a_grader_in(
    tmp_path: Path, docker_image: str, signum: int
) -> None:
    suite = make_suite(tmp_path)
    text = suite.read_text().replace(
        f"command: [python3, -c, {json.dumps(PROBE)}]", "command: [sleep, '300']"
    )
    suite.write_text(text)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            AS_FROM_A_TERMINAL,
            "check-fixtures",
            "--suite",
            str(suite),
            "--no-reviewer",
            "--out",
            str(tmp_path / "out"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Only this ci-evals process's containers (its owner label): other runs on
    # the same engine (a parallel test session) start and leave their own.
    owner = {engine.LABEL_OWNER: engine.owner_label(proc.pid)}
    deadline = time.monotonic() + 60
    while not (mine := set(containers(**owner))):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    time.sleep(1.0)  # the grader's exec is under way
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    left = set(containers(**owner)) | (set(containers(**{engine.LABEL: "1"})) & mine)
    assert left == set(), left


def test_mcp_check_passes_a_real_mcp_server_inside_the_image(
    tmp_path: Path, docker_image: str
) -> None:
    # The official `mcp` package's server, started fresh in the container for
    # every sub-test (`docker exec -i`, spawn). mcp-check starts them all at
    # once; on the sandbox's one CPU of a loaded machine each python3 + mcp
    # import can take longer than the default 10 s, hence the timeout.
    server = DATA / "mcp" / "sdk_server.py"
    (tmp_path / "server.py").write_bytes(server.read_bytes())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci_evals",
            "mcp-check",
            "--json",
            "--timeout",
            "60",
            "--image",
            docker_image,
            "--",
            "python3",
            "server.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    failed = [s["id"] for s in report["subtests"] if s["required"] and not s["passed"]]
    assert failed == [], report
