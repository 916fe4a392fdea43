"""The README's workflow, pasted as it is, on the real-API path: the action prepares its
own sandbox, and the stage runs isolated.

The job is the README's *In CI* block, run step by step in the Actions stand-in
(tests/actions_runner.py): the checkout is the user's repository the test made,
the `uses: …/ci-evals` step is this repository's action.yml with the block's
`with:`, `secrets.ANTHROPIC_API_KEY` a key. A stub server stands in for the
model API (`ANTHROPIC_BASE_URL` in the runner's environment, as
tests/run/test_real_api_path.py does), so the run takes the `anthropic`
endpoint: the key in the proxy, the agent in bubblewrap. A runner without
bubblewrap and with Ubuntu 24.04's AppArmor switch on is played by programs on
PATH (apt-get, sysctl, sudo) — the process boundary; the action's own steps
and ci-evals run for real.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci_evals.endpoints.stub_model import StubServer, load_script
from tests.actions_runner import ActionsRunner
from tests.github.test_action import ACTION, runner, users_repository
from tests.github.test_comment import FakeGitHub, github
from tests.paths import REPO as REPO_DIR

__all__ = ["github"]

REAL_KEY = "sk-ant-pasted-snippet-key-0000000000000042"
# The hosted Linux images GitHub documents (runs-on labels) the action prepares.
LINUX_IMAGES = {
    "ubuntu-latest",
    "ubuntu-24.04",
    "ubuntu-22.04",
    "ubuntu-24.04-arm",
    "ubuntu-22.04-arm",
}


def yaml_block_after(page: Path, heading: str) -> dict[str, Any]:
    """The first ```yaml block after `heading` in `page`, parsed."""
    text = page.read_text(encoding="utf-8").split(heading, 1)[1]
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    data: dict[str, Any] = yaml.safe_load(block)
    return data


def readme_workflow() -> dict[str, Any]:
    return yaml_block_after(REPO_DIR / "README.md", "## In CI")


def test_the_readme_and_docs_paste_the_same_job() -> None:
    readme = readme_workflow()
    docs = yaml_block_after(REPO_DIR / "docs/github.md", "## The action in another repository")
    assert readme == docs
    (job,) = readme["jobs"].values()
    assert job["runs-on"] in LINUX_IMAGES
    assert [str(s["uses"]).split("@")[0] for s in job["steps"]] == [
        "actions/checkout",
        "your-org/ci-evals",
    ]


def run_pasted_job(actions: ActionsRunner) -> dict[str, str]:
    """The README's job in `actions`: the checkout is the workspace already, the
    ci-evals step runs action.yml with the block's `with:` evaluated; its outputs."""
    (job,) = readme_workflow()["jobs"].values()
    outputs: dict[str, str] = {}

    def ci_evals(step: Mapping[str, Any]) -> None:
        given = {k: actions.evaluate(str(v), {}) for k, v in (step.get("with") or {}).items()}
        outputs.update(actions.run_action(ACTION, given))

    actions.run_job(job, uses={"actions/checkout": lambda _: None, "your-org/ci-evals": ci_evals})
    return outputs


@pytest.fixture
def pasted(tmp_path: Path, github: FakeGitHub) -> Iterator[tuple[ActionsRunner, StubServer, Path]]:
    """The user's repository, its pull request event (base and head), the runner with
    the key as a secret and the stand-in model API as `ANTHROPIC_BASE_URL`."""
    repo, base, head = users_repository(tmp_path, budget_usd=100.0)
    actions = runner(tmp_path, repo, github, head)
    event = {**actions.event}
    event["pull_request"] = {**event["pull_request"], "base": {"sha": base, "ref": "main"}}
    actions.event = event
    actions.event_path.write_text(json.dumps(event), encoding="utf-8")
    actions.secrets["ANTHROPIC_API_KEY"] = REAL_KEY
    with StubServer(load_script(repo / "examples/labsmith/stub/labsmith.yaml")) as api:
        actions.base_env["ANTHROPIC_BASE_URL"] = api.url
        yield actions, api, repo


def assert_ran_isolated(
    actions: ActionsRunner, outputs: Mapping[str, str], api: StubServer
) -> None:
    log = actions.log()
    assert actions.failed() == [], log
    (prepare,) = [s for s in actions.steps if s.name == "Prepare the sandbox"]
    assert prepare.returncode == 0 and "runs in the bwrap sandbox" in prepare.stdout, log
    assert outputs["verdict"] == "passed", log
    results = json.loads(Path(outputs["results"]).read_text(encoding="utf-8"))
    # The real-API path, isolated: the proxy holds the key, bubblewrap holds the agent.
    assert (results["model_endpoint"], results["sandbox"], results["isolated"]) == (
        "anthropic",
        "bwrap",
        True,
    ), log
    assert api.requests, "the stand-in model API saw no request"
    # Cost and tokens next to the verdict: what the proxy forwarded (the real-API path).
    forwarded = results["forwarded"]
    assert forwarded["requests"] > 0 and forwarded["cost_usd"] > 0, forwarded
    assert outputs["cost_usd"] == f"{results['total_cost_usd']:.4f}" != "0.0000"
    assert outputs["input_tokens"] == str(forwarded["input_tokens"]) != "0"
    assert outputs["output_tokens"] == str(forwarded["output_tokens"]) != "0"
    ran = [s for s in actions.steps if s.returncode is not None]
    assert [s.name for s in ran if REAL_KEY in s.env.values()] == ["Run the evals"]
    run_folder = Path(outputs["results"]).parent
    files = [p for p in run_folder.rglob("*") if p.is_file()]
    assert files
    assert [p for p in files if REAL_KEY.encode() in p.read_bytes()] == []


@pytest.mark.slow
def test_the_pasted_workflow_runs_the_stage_isolated_on_the_real_api(
    pasted: tuple[ActionsRunner, StubServer, Path],
) -> None:
    actions, api, _ = pasted
    outputs = run_pasted_job(actions)
    assert_ran_isolated(actions, outputs, api)
    assert outputs["from_stage"] == "5"


def _program(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + script, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def bare_ubuntu_2404(tmp_path: Path) -> tuple[Path, Path]:
    """PATH folders of a runner like GitHub's Ubuntu 24.04 image: no bubblewrap, and
    AppArmor forbidding unprivileged user namespaces until `sysctl -w` allows them.
    `apt-get install bubblewrap` puts a bwrap on PATH that fails as bubblewrap does
    there; `sysctl -w …=0` turns it into the real one. `sudo -n` runs its command.
    Returns (the folder of these programs, the system's programs less bwrap) and logs
    every call to `calls.log`."""
    fake, system = tmp_path / "fake-bin", tmp_path / "system-bin"
    fake.mkdir()
    system.mkdir()
    real_bwrap = shutil.which("bwrap")
    assert real_bwrap is not None
    for folder in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        for entry in sorted(Path(folder).glob("*")) if Path(folder).is_dir() else []:
            target = system / entry.name
            if entry.name != "bwrap" and not os.path.lexists(target):
                target.symlink_to(entry)
    log = tmp_path / "calls.log"
    knob = tmp_path / "apparmor_restrict_unprivileged_userns"
    knob.write_text("1\n")
    denied = 'echo "bwrap: setting up uid map: Permission denied" >&2; exit 1\n'
    _program(fake, "sudo", f'echo "sudo $*" >> {log}\n[ "$1" = -n ] && shift\nexec "$@"\n')
    _program(
        fake,
        "apt-get",
        f'echo "apt-get $*" >> {log}\n'
        f"case \"$*\" in *install*bubblewrap*) printf '#!/bin/sh\\n{denied}' > {fake}/bwrap;"
        f" chmod +x {fake}/bwrap;; esac\n",
    )
    _program(
        fake,
        "sysctl",
        f'echo "sysctl $*" >> {log}\n'
        f'case "$*" in *-n*kernel.apparmor_restrict_unprivileged_userns*) cat {knob};;\n'
        f"  *-w*kernel.apparmor_restrict_unprivileged_userns=0*) echo 0 > {knob};"
        f" ln -sf {real_bwrap} {fake}/bwrap;;\n"
        "  *) exit 255;; esac\n",
    )
    return fake, system


def on_path(actions: ActionsRunner, fake: Path, system: Path) -> None:
    """The runner's PATH: the fakes, the runner's Python, the system less bwrap."""
    python_bin = actions.base_env["PATH"].split(os.pathsep)[0]
    actions.base_env["PATH"] = os.pathsep.join([str(fake), python_bin, str(system)])


@pytest.mark.slow
def test_on_a_bare_ubuntu_2404_runner_the_action_installs_and_allows_bubblewrap(
    tmp_path: Path, pasted: tuple[ActionsRunner, StubServer, Path]
) -> None:
    actions, api, _ = pasted
    fake, system = bare_ubuntu_2404(tmp_path)
    on_path(actions, fake, system)

    outputs = run_pasted_job(actions)

    assert_ran_isolated(actions, outputs, api)
    calls = (tmp_path / "calls.log").read_text().splitlines()
    root = os.getuid() == 0  # the action runs them itself as root, with sudo -n otherwise
    expected = [
        "apt-get update -qq",
        "env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap",
        "sysctl -q -w kernel.apparmor_restrict_unprivileged_userns=0",
    ]
    made = [c for c in calls if c.startswith("sudo ")]
    assert made == ([] if root else [f"sudo -n {c}" for c in expected]), calls
    assert "apt-get install -y -qq bubblewrap" in "\n".join(calls)
    assert "sysctl -q -w kernel.apparmor_restrict_unprivileged_userns=0" in calls
    (prepare,) = [s for s in actions.steps if s.name == "Prepare the sandbox"]
    assert "installing bubblewrap" in prepare.stdout
    assert "allowing unprivileged user namespaces" in prepare.stdout


@pytest.mark.slow
def test_a_runner_that_cannot_isolate_stops_naming_the_isolation_input(
    tmp_path: Path, pasted: tuple[ActionsRunner, StubServer, Path]
) -> None:
    """bubblewrap installed but refused, and no AppArmor switch to turn (a container
    job, a locked-down self-hosted runner): one error naming `isolation:`; nothing runs,
    no request reaches the model API."""
    actions, api, repo = pasted
    fake, system = bare_ubuntu_2404(tmp_path)
    (fake / "sysctl").unlink()  # not Ubuntu 24.04's AppArmor: nothing to allow
    _program(fake, "bwrap", 'echo "bwrap: No permissions to create new namespace" >&2; exit 1\n')
    on_path(actions, fake, system)

    outputs = run_pasted_job(actions)

    (failed,) = actions.failed()
    assert failed.name == "Prepare the sandbox" and failed.returncode == 2, actions.log()
    errors = [line for line in failed.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1, failed.stdout
    assert "cannot isolate the agent on this runner" in errors[0]
    assert "No permissions to create new namespace" in errors[0]
    assert "set the action's isolation: input" in errors[0]
    ran = [s.name for s in actions.steps if s.returncode is not None]
    assert "Run the evals" not in ran and "Report" not in ran, ran
    assert api.requests == []
    assert outputs["verdict"] == ""
    assert not (repo / ".ci-evals" / "run" / "results.json").exists()
