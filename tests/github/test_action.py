"""The composite action (`action.yml`), its `run:` steps executed as the runner would.

A user's repository is made from the labsmith example, laid out as this
repository is (suite, stage map and fixtures at its top, the plugin and its
stub scripts in examples/labsmith/), with a base commit and a pull request
commit on top. The action's
steps run with bash in an Actions-like environment (tests/actions_runner.py):
the install step really installs ci-evals from a copy of this repository (the
action's checkout), compute-stage really selects from the diff, the run
really runs on the stub model, the report really posts its sticky comment to
the stand-in GitHub REST server of the comment tests.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from ci_evals.main import main
from tests import case_units_repo
from tests.actions_runner import (
    UPLOAD_RUNTIME_TOKEN,
    ActionsRunner,
    ArtifactStore,
    parse_outputs,
    runner_env,
    runner_python,
)
from tests.conftest import copy_example, git
from tests.github.test_comment import MARKER, PR, REPO, TOKEN, FakeGitHub, github
from tests.github_actions_fake import ActionsGitHub, actions_github, zip_of
from tests.paths import REPO as REPO_DIR
from tests.run.test_run_command import ci_evals

__all__ = ["actions_github", "github"]  # the stand-in servers, shared with their own tests

ROOT = REPO_DIR
ACTION = ROOT / "action.yml"
STUB = "stub:examples/labsmith/stub/labsmith.yaml"  # relative to the workspace


# The steps that install ci-evals: a job after the first has it already.
INSTALLED = frozenset({"Key the pip cache on the lock", "Install ci-evals"})


def load_action() -> dict[str, object]:
    data: dict[str, object] = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    return data


# ------------------------------------------------------------------ the file itself


def test_the_action_has_the_documented_inputs_and_outputs() -> None:
    action = load_action()
    inputs = action["inputs"]
    outputs = action["outputs"]
    assert isinstance(inputs, dict) and isinstance(outputs, dict)
    for name in ("suite", "base", "model", "repeat", "comment", "baseline", "shards", "shard",
                 "from-stage", "merge", "shard-key"):  # fmt: skip
        assert name in inputs
    assert inputs["shards"]["default"] == "1"  # one job does it all, as before shards
    assert set(outputs) == {
        "from_stage",
        "fixture_stages",
        "units",
        "units_json",
        "verdict",
        "results",
        "cost_usd",
        "input_tokens",
        "output_tokens",
        "matrix",
        "shards",
        "forecast_usd",
        "gate",
        "regrade",
        "regrade_reason",
    }


def test_the_marketplace_listing() -> None:
    """What GitHub Marketplace shows: a description of at most 125 characters and a
    branding of one of its Feather icons and colours (check-jsonschema checks the names)."""
    action = load_action()
    description = action["description"]
    assert isinstance(description, str) and 40 <= len(description) <= 125, description
    assert "pull request" in description and "Claude Code plugins" in description
    assert action["branding"] == {"icon": "check-circle", "color": "green"}


def test_no_input_is_interpolated_into_a_script() -> None:
    runs = load_action()["runs"]
    assert isinstance(runs, dict)
    for step in runs["steps"]:
        assert "${{" not in str(step.get("run", "")), step
        uses = step.get("uses")
        if uses:  # pinned by a full commit SHA, the tag in a comment
            ref = uses.split("@", 1)[1]
            assert len(ref) == 40 and all(c in "0123456789abcdef" for c in ref), uses


def test_parse_outputs_reads_both_forms() -> None:
    text = "a=1\nb<<ghadelimiter_x\nline 1\nline 2\nghadelimiter_x\nc=x=y\n"
    assert parse_outputs(text) == {"a": "1", "b": "line 1\nline 2", "c": "x=y"}


# ------------------------------------------------------------------ running it


def users_repository(tmp_path: Path, *, budget_usd: float | None = None) -> tuple[Path, str, str]:
    """The example laid out at a repository's top; BASE, then a PR commit that
    edits a stage-5 agent (so stage 5 is the first to run). `budget_usd`: the
    suite's, instead of the example's $5 (less than a real model's worst case)."""
    repo = copy_example(tmp_path / "user-repo", readme=False).root
    if budget_usd is not None:
        suite = repo / "ci-evals.yaml"
        text = suite.read_text(encoding="utf-8")
        assert text.count("budget_usd: 5.0 ") == 1
        suite.write_text(text.replace("budget_usd: 5.0 ", f"budget_usd: {budget_usd} "))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    agent = repo / "examples/labsmith/plugin/agents/chapter-implementer.md"
    agent.write_text(agent.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    git(repo, "commit", "-q", "-am", "tweak the chapter implementer")
    return repo, base, git(repo, "rev-parse", "HEAD").strip()


def action_checkout(tmp_path: Path) -> Path:
    """What the runner checks out for `uses: OWNER/ci-evals@SHA`: this repository."""
    path = tmp_path / "action"
    path.mkdir()
    for name in ("pyproject.toml", "README.md", "action.yml", "action/constraints.txt"):
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, path / name)
    shutil.copytree(
        ROOT / "ci_evals", path / "ci_evals", ignore=shutil.ignore_patterns("__pycache__")
    )
    return path


def runner(tmp_path: Path, repo: Path, github: FakeGitHub, head: str) -> ActionsRunner:
    bin_dir = runner_python(tmp_path)
    env = runner_env(bin_dir)
    payload = {
        "number": PR,
        "pull_request": {"number": PR, "head": {"sha": head}},
        "repository": {"default_branch": "main"},
    }
    return ActionsRunner(
        workspace=repo,
        temp=tmp_path / "runner-temp",
        event_name="pull_request",
        event=payload,
        github={
            "token": TOKEN,
            "repository": REPO,
            "sha": head,
            "api_url": github.url,
            "action_path": str(action_checkout(tmp_path)),
            "workflow_ref": f"{REPO}/.github/workflows/evals.yml@refs/pull/{PR}/merge",
            "base_ref": "main",
        },
        base_env=env,
    )


@pytest.mark.slow
def test_the_action_runs_the_affected_stages_and_comments(
    tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    github = actions_github
    github.add_run(conclusion="failure")  # no successful run of evals.yml on main: no baseline
    repo, base, head = users_repository(tmp_path)
    actions = runner(tmp_path, repo, github, head)

    outputs = actions.run_action(
        ACTION,
        {"base": base, "model": STUB, "comment": "true", "baseline": "true"},
    )

    log = "\n".join(f"--- {s.name}: {s.returncode}\n{s.stdout}\n{s.stderr}" for s in actions.steps)
    ran = [s.name for s in actions.steps if s.returncode is not None]
    assert ran == [
        "Key the pip cache on the lock",
        "Install ci-evals",
        "Check the inputs",
        "Select the first stage to run",
        "Prepare the sandbox",
        "Fetch the baseline",
        "Forecast the cost",
        "Run the evals",
        "Report",
    ], log
    assert all(s.returncode == 0 for s in actions.steps if s.returncode is not None), log
    assert outputs["from_stage"] == "5", log
    assert outputs["verdict"] == "passed", log
    results = Path(outputs["results"])
    assert results == repo / ".ci-evals" / "run" / "results.json"
    data = json.loads(results.read_text(encoding="utf-8"))
    assert data["from_stage"] == 5
    assert data["model_endpoint"].startswith("stub:")
    # The stub's cost (simulated) and tokens: the stages' own counts, not metered.
    assert data["forwarded"] is None and data["total_cost_usd"] > 0
    stages = [stage for scenario in data["scenarios"] for stage in scenario["stages"]]
    assert outputs["cost_usd"] == f"{data['total_cost_usd']:.4f}", log
    assert int(outputs["input_tokens"]) == sum(s["input_tokens"] or 0 for s in stages) > 0
    assert int(outputs["output_tokens"]) == sum(s["output_tokens"] or 0 for s in stages) > 0
    assert (repo / ".ci-evals" / "run" / "junit.xml").is_file()
    # The lock's copy for setup-python's cache key is gone before anything ran.
    assert not list(repo.glob(".ci-evals-lock.*")), list(repo.iterdir())
    (lock,) = [s for s in actions.steps if s.name == "Key the pip cache on the lock"]
    assert lock.outputs["path"].startswith(".ci-evals-lock.")
    assert lock.outputs["path"].endswith("/constraints.txt")
    site = repo / ".ci-evals" / "run" / "site"  # uploaded with the run folder
    assert "5 generate-chapter" in (site / "index.html").read_text(encoding="utf-8")
    summary = actions.summary.read_text(encoding="utf-8")
    assert "## ci-evals: passed" in summary
    assert "(simulated: stub-model prices, nothing was paid)" in summary
    assert "- Served from fixtures (not run): 1, 2, 3, 4" in summary
    # baseline: true looked for the calling workflow's last good run on the base branch.
    assert any(
        r.path.startswith(f"/repos/{REPO}/actions/workflows/evals.yml/runs?branch=main")
        for r in github.requests
    ), github.paths()
    assert "**No baseline:** no successful run of evals.yml on main" in summary
    (comment,) = github.comments
    assert comment["body"].startswith(MARKER)
    assert "(stub model: a wiring check, not a model verdict)" in comment["body"]
    skipped = [s.name for s in actions.steps if s.returncode is None]
    # setup-python and upload-artifact: other actions, pinned; no fixture changed; no shards.
    assert "Grade the changed fixtures" in skipped, skipped
    assert {"Split the run into shards", "Merge the shards"} <= set(skipped), skipped
    assert (outputs["matrix"], outputs["shards"]) == ("", "")
    # Priced before the run (no history: unknown), said in the summary; no gate set.
    assert (outputs["gate"], outputs["forecast_usd"]) == ("open", "0.0000")
    assert "## ci-evals: forecast" in summary and "cost unknown (no history" in summary


@pytest.mark.slow
def test_a_change_that_affects_no_stage_runs_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    repo, _, _ = users_repository(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "NOTES.txt").write_text("not a plugin file\n")
    git(repo, "add", "NOTES.txt")
    git(repo, "commit", "-q", "-m", "notes")
    head = git(repo, "rev-parse", "HEAD").strip()
    actions = runner(tmp_path, repo, github, head)

    outputs = actions.run_action(ACTION, {"base": base, "model": STUB})

    log = "\n".join(f"--- {s.name}: {s.returncode}\n{s.stdout}\n{s.stderr}" for s in actions.steps)
    assert outputs == {
        "from_stage": "none",
        "fixture_stages": "",
        "units": "",  # a map of stages alone selects no units
        "units_json": "",
        "forecast_usd": "",
        "gate": "",
        "regrade": "",  # nothing ran
        "regrade_reason": "",
        "verdict": "skipped",
        "results": "",
        "cost_usd": "",
        "input_tokens": "",
        "output_tokens": "",
        "matrix": "",
        "shards": "",
    }, log
    assert not (repo / ".ci-evals").exists()
    assert "skipped (the change affects no stage)" in actions.summary.read_text()
    assert github.requests == []


@pytest.mark.slow
def test_a_broken_fixture_is_graded_and_fails_the_report(
    tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    """Fixture 3 changed: the stub run starts at stage 4 and serves fixture 3 as stage 3's
    answer, so the action grades it (check-fixtures, no model) and the comment says so."""
    repo, _, _ = users_repository(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()
    plan = repo / "fixtures/3-plan-lab-output/lab/plan.json"
    plan.write_text(plan.read_text().replace('"chapter_count": 3', '"chapter_count": 4'))
    git(repo, "commit", "-q", "-am", "a fixture the schema accepts and stage 3 fails")
    head = git(repo, "rev-parse", "HEAD").strip()
    actions = runner(tmp_path, repo, actions_github, head)

    outputs = actions.run_action(ACTION, {"base": base, "model": STUB, "comment": "true"})

    log = "\n".join(f"--- {s.name}: {s.returncode}\n{s.stdout}\n{s.stderr}" for s in actions.steps)
    assert "Grade the changed fixtures" in [s.name for s in actions.steps if s.returncode == 0]
    assert (outputs["from_stage"], outputs["fixture_stages"]) == ("4", "3"), log
    assert outputs["verdict"] == "failed", log
    (comment,) = actions_github.comments
    assert "### Changed fixtures (graded by `ci-evals check-fixtures`, no model)" in comment["body"]
    assert "| 3 | fixtures/3-plan-lab-output | failed |" in comment["body"], comment["body"]


# ------------------------------------------------------------------ sharded: three jobs


def job(first: ActionsRunner, name: str, artifacts: ArtifactStore) -> ActionsRunner:
    """Another job of the same workflow: the same checkout, contexts and Python, its own
    runner folder; ci-evals installed by the first job stands in for its install."""
    runner = dataclasses.replace(first, temp=first.temp.parent / name, steps=[])
    artifacts.runner = runner
    return runner


@pytest.mark.slow
def test_the_action_sharded_plans_runs_each_shard_and_merges(
    tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    repo, base, head = users_repository(tmp_path)
    (tmp_path / "artifacts").mkdir()
    inputs = {"artifact-name": "ci-evals-run", "out": ".ci-evals/run"}  # the defaults
    artifacts = ArtifactStore(tmp_path / "artifacts", inputs)
    store = artifacts.store
    github = actions_github
    plan = runner(tmp_path, repo, github, head)
    plan = dataclasses.replace(plan, github={**plan.github, "run_id": "4242"})
    key = {"shard-key": "a-secret-of-this-repository-0123456789"}  # secrets.CI_EVALS_SHARD_KEY

    planned = plan.run_action(ACTION, {"base": base, "shards": "2"})

    assert plan.failed() == [], plan.log()
    matrix = json.loads(planned["matrix"])
    assert matrix == {"include": [{"shard": f"{k}/2", "from_stage": "5"} for k in (1, 2)]}
    assert (planned["shards"], planned["from_stage"], planned["verdict"]) == ("2", "5", "")
    assert not (repo / ".ci-evals").exists()  # a plan runs nothing
    installed = INSTALLED

    for entry in matrix["include"]:
        shard = job(plan, f"shard-{entry['shard'][0]}", artifacts)
        given = {"model": STUB, "shard": entry["shard"], "from-stage": entry["from_stage"], **key}
        done = shard.run_action(
            ACTION, given, uses={"actions/upload-artifact": artifacts.upload}, provided=installed
        )
        assert shard.failed() == [], shard.log()
        assert done["from_stage"] == "5" and done["verdict"] == ""  # the merge job reports
        assert "Report" in [s.name for s in shard.steps if s.outcome == "skipped"]
        shutil.rmtree(repo / ".ci-evals")  # each job's checkout is fresh
    assert sorted(p.name for p in store.iterdir()) == [
        "ci-evals-run-shard-1",
        "ci-evals-run-shard-2",
    ]
    assert all(any(p.name == "shard.mac.json" for p in s.rglob("*")) for s in store.iterdir())

    # Another key (another repository's, a guess): every shard is refused, nothing merged.
    refused = job(plan, "merge-other-key", artifacts)
    refused.run_action(
        ACTION,
        {"base": base, "model": STUB, "merge": "true", "comment": "false",
         "shard-key": "not-the-key-the-shards-were-signed-with"},
        uses={"actions/download-artifact": artifacts.download_pattern},
        provided=installed,
    )  # fmt: skip
    assert [s.name for s in refused.failed()] == ["Merge the shards"], refused.log()
    (step,) = [s for s in refused.steps if s.name == "Merge the shards"]
    assert "mac: the shard's MAC is not this run's key's" in step.stderr, step.stderr

    merge = job(plan, "merge", artifacts)
    outputs = merge.run_action(
        ACTION,
        {"base": base, "model": STUB, "merge": "true", "comment": "true", **key},
        uses={
            "actions/upload-artifact": artifacts.upload,
            "actions/download-artifact": artifacts.download_pattern,
        },
        provided=installed,
    )

    assert merge.failed() == [], merge.log()
    (merged,) = [s for s in merge.steps if s.name == "Merge the shards"]
    assert merged.stdout.startswith("merged 2 shard(s), 2 unit(s)"), merged.stdout
    assert "unsigned" not in merged.stderr  # signed in this run, checked with its key
    assert (outputs["from_stage"], outputs["verdict"]) == ("5", "passed"), merge.log()
    data = json.loads(Path(outputs["results"]).read_text(encoding="utf-8"))
    assert data["shard"] is None and len(data["merged_shards"]) == 2
    summary = merge.summary.read_text(encoding="utf-8")
    assert "## ci-evals: passed" in summary and "- Shards: 2 x " in summary
    (comment,) = github.comments
    assert comment["body"].startswith(MARKER)
    assert sorted(p.name for p in store.iterdir())[0] == "ci-evals-run"  # the merged run


@pytest.mark.slow
def test_the_action_sharded_with_nothing_to_run_plans_no_shard(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo, _, _ = users_repository(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "NOTES.txt").write_text("not a plugin file\n")
    git(repo, "add", "NOTES.txt")
    git(repo, "commit", "-q", "-m", "notes")
    actions = runner(tmp_path, repo, github, git(repo, "rev-parse", "HEAD").strip())

    outputs = actions.run_action(ACTION, {"base": base, "shards": "4"})

    assert actions.failed() == [], actions.log()
    assert outputs == {
        "from_stage": "none",
        "fixture_stages": "",
        "units": "",  # a map of stages alone selects no units
        "units_json": "",
        "forecast_usd": "",
        "gate": "",
        "regrade": "",  # nothing ran
        "regrade_reason": "",
        "verdict": "skipped",
        "results": "",
        "cost_usd": "",
        "input_tokens": "",
        "output_tokens": "",
        "matrix": '{"include":[]}',  # plan's own answer: test `shards` in the jobs' `if:`
        "shards": "0",
    }
    assert "skipped (the change affects no stage)" in actions.summary.read_text()
    assert not (repo / ".ci-evals").exists()


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"shard": "1/2"}, "shard needs from-stage (the plan's matrix.from_stage)"),
        ({"shard": "1/2; rm -rf /", "from-stage": "4"}, "shard: I/K, as the plan's matrix.shard"),
        ({"shard": "1/2", "from-stage": "4", "merge": "true"}, "shard and merge"),
        ({"shard": "1/2", "from-stage": "4\nverdict=passed"}, "from-stage: a stage number"),
        ({"shards": "two"}, "shards: a positive whole number"),
    ],
)
def test_sharded_inputs_that_do_not_fit_stop_the_action(
    tmp_path: Path, given: dict[str, str], error: str
) -> None:
    actions = ActionsRunner(
        workspace=tmp_path,
        temp=tmp_path / "temp",
        event_name="pull_request",
        event={},
        base_env=runner_env(Path(sys.executable).parent),
    )
    actions.run_action(ACTION, given, provided=INSTALLED)
    (failed,) = actions.failed()
    assert failed.name == "Check the inputs" and failed.returncode == 2
    assert f"::error title=ci-evals::{error}" in failed.stdout
    assert [s.name for s in actions.steps if s.returncode is not None] == ["Check the inputs"]


# ------------------------------------------------------------------ the key and the upload

API_KEY = "sk-ant-actiontest-0000000000000000000007"


def hostile_stub(repo: Path, host_file: Path) -> str:
    """The labsmith stub, its stage 5 (the one the PR affects) starting with a Bash
    command that links the environment of whoever reads the link next, a host file
    and a host folder, and makes a pipe; a `model:` input for it."""
    attack = (
        f"ln -s /proc/self/environ after-env; ln -s {host_file} host-file; "
        f"ln -s {host_file.parent} host-dir; ln -s /proc/self/environ lab/env; "
        "mkfifo pipe; ls lab/chapters"
    )
    text = (repo / "examples/labsmith/stub/labsmith.yaml").read_text(encoding="utf-8")
    listing = '- bash: { command: "ls lab/chapters", description: "List chapter plans" }'
    assert text.count(listing) == 1
    hostile = text.replace(listing, f"- bash: {{ command: {json.dumps(attack)} }}")
    # Beside the original: the script names its fixtures relative to itself.
    (repo / "examples/labsmith/stub/hostile.yaml").write_text(hostile, encoding="utf-8")
    return "stub:examples/labsmith/stub/hostile.yaml"


@pytest.mark.slow
def test_a_hostile_agents_links_upload_no_key_and_no_host_file(
    tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    """The agent links `/proc/self/environ`, a host file and a host folder into its
    workspace, and makes a pipe. The upload step follows links (the stand-in reads as
    actions/upload-artifact does, in a process holding the step's environment): the
    caller put the key in the step's `env:` (inherited by every step of a composite
    action) and the upload holds ACTIONS_RUNTIME_TOKEN. The run folder records the
    links as data, so the artifact holds neither, nor the host file."""
    repo, base, head = users_repository(tmp_path)
    host_file = tmp_path / "host" / "secret.txt"
    host_file.parent.mkdir()
    host_file.write_text("host-file-content-0000000000000008\n")
    model = hostile_stub(repo, host_file)
    (tmp_path / "artifacts").mkdir()
    artifacts = ArtifactStore(
        tmp_path / "artifacts", {"artifact-name": "ci-evals-run", "out": ".ci-evals/run"}
    )
    actions = runner(tmp_path, repo, actions_github, head)
    actions.base_env["ANTHROPIC_API_KEY"] = API_KEY  # the old snippet: env: on the step
    artifacts.runner = actions

    actions.run_action(
        ACTION,
        {"base": base, "model": model, "comment": "false"},
        uses={"actions/upload-artifact": artifacts.upload},
    )

    (evals,) = [s for s in actions.steps if s.name == "Run the evals"]
    assert evals.returncode == 0, actions.log()
    uploaded = artifacts.store / "ci-evals-run"
    stage = uploaded / "acme-arm" / "5-generate-chapter"
    assert (uploaded / "results.json").is_file(), actions.log()
    record = json.loads((stage / "after.links.json").read_text())
    assert record["links"]["after-env"] == "/proc/self/environ"  # recorded, as data
    assert record["links"]["host-file"] == str(host_file)
    assert record["other"] == {"pipe": "fifo"}
    texts = [p.read_bytes() for p in uploaded.rglob("*") if p.is_file()]
    assert texts
    for secret in (API_KEY, UPLOAD_RUNTIME_TOKEN, "host-file-content-0000000000000008"):
        assert not [t for t in texts if secret.encode() in t], secret
    (check,) = [s for s in actions.steps if s.name == "Check the inputs"]
    assert "::warning title=ci-evals::ANTHROPIC_API_KEY is set in the env:" in check.stdout


@pytest.mark.slow
def test_the_key_input_reaches_the_step_that_runs_the_evals_alone(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """`anthropic-api-key:` is read by the run step alone: no other step of the action
    (nor the upload, which gets the job's environment) holds it, and nothing warns."""
    repo, base, head = users_repository(tmp_path)
    actions = runner(tmp_path, repo, github, head)
    actions.run_action(
        ACTION,
        {"base": base, "model": STUB, "comment": "false", "anthropic-api-key": API_KEY},
    )
    ran = [s for s in actions.steps if s.returncode is not None]
    assert [s.name for s in ran if API_KEY in s.env.values()] == ["Run the evals"], actions.log()
    assert API_KEY not in actions.runner_env(tmp_path / "o").values()  # what the upload gets
    assert "::warning" not in "".join(s.stdout for s in ran)
    assert actions.failed() == [], actions.log()


@pytest.mark.slow
def test_the_action_runs_only_the_cases_a_change_reaches(
    tmp_path: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A suite of ten `claude plugin eval` cases drafted by `ci-evals init`: a PR that
    edits one skill runs the two cases naming it, and the outputs say which."""
    repo = tmp_path / "cases-repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    case_units_repo.plugin_repo(repo)
    monkeypatch.chdir(repo)
    assert main(["init", case_units_repo.PLUGIN]) == 0
    base = case_units_repo.commit(repo, "ci-evals init")
    skill = repo / case_units_repo.PLUGIN / "skills/greet/SKILL.md"
    skill.write_text(skill.read_text(encoding="utf-8") + "Smile.\n", encoding="utf-8")
    head = case_units_repo.commit(repo, "greet warmer")
    actions = runner(tmp_path, repo, github, head)

    stub = f"stub:stub/{case_units_repo.PLUGIN}.yaml"
    outputs = actions.run_action(
        ACTION, {"base": base, "model": stub, "repeat": "1", "comment": "false"}
    )

    log = "\n".join(f"--- {s.name}: {s.returncode}\n{s.stdout}\n{s.stderr}" for s in actions.steps)
    assert outputs["from_stage"] == "1", log
    assert outputs["units"] == "greet-basic greet-formal", log
    assert json.loads(outputs["units_json"]) == ["greet-basic", "greet-formal"], log
    assert outputs["verdict"] == "passed", log
    results = json.loads(Path(outputs["results"]).read_text(encoding="utf-8"))
    assert sorted({s["id"] for s in results["scenarios"]}) == ["greet-basic", "greet-formal"]


# ------------------------------------------------------------------ grader-only: re-grade

NOTES_CHECK = '      - { id: has-notes, files: "notes.md", count: 1 }\n'


def mains_run_artifact(tmp_path: Path, repo: Path, github: ActionsGitHub) -> dict[str, object]:
    """main's last run (the stub, at the checked-out base commit), served as the
    `ci-evals-run` artifact of evals.yml's last good run on main; its results."""
    out = tmp_path / "main-run"
    proc = ci_evals("run", "--suite", "ci-evals.yaml", "--model", STUB, "--out", str(out), cwd=repo)
    assert proc.returncode == 0, proc.stderr
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    github.add_artifact(github.add_run(), zip_of(files))
    results: dict[str, object] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return results


@pytest.mark.slow
def test_a_grader_only_change_regrades_mains_run_and_a_plugin_change_runs(
    tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    github = actions_github
    repo, base, _ = users_repository(tmp_path)
    git(repo, "checkout", "-q", base)
    main_results = mains_run_artifact(tmp_path, repo, github)
    # A check main's own outputs fail: only a grader changed (the suite's grading keys).
    suite = repo / "ci-evals.yaml"
    text = suite.read_text(encoding="utf-8")
    anchor = '      - { id: chapter-implementer-used, trajectory: { subagent: "labsmith:chapter-implementer" } }\n'  # noqa: E501
    assert text.count(anchor) == 1
    suite.write_text(text.replace(anchor, anchor + NOTES_CHECK), encoding="utf-8")
    git(repo, "commit", "-q", "-am", "a check")
    head = git(repo, "rev-parse", "HEAD").strip()
    actions = runner(tmp_path, repo, github, head)

    outputs = actions.run_action(
        ACTION, {"base": base, "model": STUB, "comment": "true", "baseline": "true"}
    )

    log = actions.log()
    assert outputs["regrade"] == "true", log
    assert outputs["regrade_reason"].startswith("only graders changed: ci-evals.yaml"), log
    (evals,) = [s for s in actions.steps if s.name == "Run the evals"]
    assert "re-grading the base run" in evals.stderr, log
    assert outputs["verdict"] == "failed", log  # the new check fails on main's outputs
    data = json.loads(Path(outputs["results"]).read_text(encoding="utf-8"))
    assert data["run_id"] == main_results["run_id"] and data["regraded_at"] is not None
    assert (repo / ".ci-evals" / "run" / "results.base.json").is_file()
    (comment,) = github.comments
    graders = "**The graders changed:** 2 criteria now fail on the baseline's own outputs"
    assert graders in comment["body"], comment["body"]
    assert "The agent ran" not in comment["body"]
    # main's fetched run is the flake ledger's history too (the report's --history).
    assert "not run on main in 1 run(s)" in comment["body"], comment["body"]

    # A plugin change on the same base, with the same baseline fetched: the agent runs.
    git(repo, "checkout", "-q", base)
    shutil.rmtree(repo / ".ci-evals")
    agent = repo / "examples/labsmith/plugin/agents/chapter-implementer.md"
    agent.write_text(agent.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    git(repo, "commit", "-q", "-am", "tweak the chapter implementer")
    head = git(repo, "rev-parse", "HEAD").strip()
    second = dataclasses.replace(
        actions,
        temp=tmp_path / "second-job",
        steps=[],
        github={**actions.github, "sha": head},
        event={**actions.event, "pull_request": {"number": PR, "head": {"sha": head}}},
    )

    outputs = second.run_action(
        ACTION, {"base": base, "model": STUB, "comment": "true", "baseline": "true"},
        provided=INSTALLED,
    )  # fmt: skip

    log = second.log()
    assert (outputs["regrade"], outputs["regrade_reason"]) == ("false", ""), log
    assert outputs["verdict"] == "passed", log
    data = json.loads(Path(outputs["results"]).read_text(encoding="utf-8"))
    assert data["regraded_at"] is None and data["run_id"] != main_results["run_id"]
    assert data["from_stage"] == 5
    assert not (repo / ".ci-evals" / "run" / "results.base.json").exists()
