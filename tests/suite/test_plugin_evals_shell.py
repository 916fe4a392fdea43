"""A command whose body expands shell commands (`` !`git status` ``, a ```! block)
with `allowed-tools: Bash(git status:*)` in its front matter, run as a
`claude plugin eval` case by the bundled CLI and by `ci-evals run` on one stub.

Measured with the bundled CLI (2.1.337): in an eval run the expansion runs under
the operator's grant (`--allow-tools`), not the command's own `allowed-tools`.
Without a Bash grant the CLI refuses it before any model request ("Shell command
permission check failed ... Bash has been denied") and grades that line as the
answer; ci-evals refuses it the same way, and says the model never ran (an
`error`: fail closed, not a verdict on the plugin). With the command's rule
granted, ci-evals runs the expansion and the case passes; the CLI then needs its
own sandbox (bubblewrap and socat) and refuses the run without it.

`init --format cases` drafts such a command's case with that grant, so it runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci_evals.endpoints.stub_model import StubServer, load_script
from tests.commands.test_init_shapes import plugin_repo
from tests.onboarding_helpers import cli, follow_printed_lines
from tests.run_helpers import plugin_eval, run_ci_evals, write_files

pytestmark = pytest.mark.slow

COMMAND = (
    "---\ndescription: Show the status\nallowed-tools: Bash(git status:*)\n---\n"
    "Status:\n\n```!\ngit status --short\n```\n\nSay STATUS-SEEN.\n"
)
FILES = {
    "p/.claude-plugin/plugin.json": '{"name": "p", "version": "0.1.0"}\n',
    "p/commands/st.md": COMMAND,
    "p/evals/st/prompt.md": "---\nruns: 1\nmax_turns: 4\n---\n/p:st\n",
    "p/evals/st/graders/said.md": "---\ntype: regex\n---\nSTATUS-SEEN\n",
    "stub.yaml": (
        "rules:\n  - name: st\n    match: {prompt_contains: 'Say STATUS-SEEN'}\n"
        "    turns:\n      - text: STATUS-SEEN\n"
    ),
    "ci-evals.yaml": "version: 1\nplugin: p\nplugin_evals: {}\n",
}
REFUSED = (
    'Shell command permission check failed for pattern "```!\\ngit status --short\\n```": '
    "Permission to use Bash has been denied."
)
# What the CLI says when its own sandbox cannot confine a granted Bash.
NO_CLI_SANDBOX = "A shell tool (Bash or PowerShell) was granted but this machine cannot confine it"


def _requests(record: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in record.read_text().splitlines() if line.strip()]
    return [line["request_body"] for line in lines if isinstance(line.get("request_body"), dict)]


def _cli(repo: Path, name: str, *flags: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """The bundled CLI's one run of the case, the model requests it made, and its
    graded answer (the trace's result line; the kept run folder removed)."""
    record, out = repo / f"{name}.jsonl", repo / f"{name}.json"
    with StubServer(load_script(repo / "stub.yaml"), record_path=record) as server:
        done = plugin_eval(
            repo / "p", repo / f"home-{name}", server.url, "--json", str(out), "--keep-temp", *flags
        )
    assert out.is_file(), done.stdout + done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    (run,) = case["arms"]["with"]
    return run, _requests(record) if record.exists() else [], _trace_result(run)


def _ours(repo: Path, name: str, *flags: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """`ci-evals run`'s stage of the case, the model requests it made, what it said."""
    done = run_ci_evals(repo, "run", "--model", "stub:stub.yaml", "--out", name, "--record", *flags)
    results = repo / name / "results.json"
    assert results.is_file(), done.stdout + done.stderr
    ((stage,),) = [s["stages"] for s in json.loads(results.read_text())["scenarios"]]
    return stage, _requests(repo / name / "model-exchanges.jsonl"), done.stderr


def _trace_result(run: dict[str, Any]) -> str:
    """The CLI's final `result` line of a kept run's trace (its graded answer)."""
    trace = Path(run["tracePath"])
    try:
        lines = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    finally:
        root = trace.parent.parent  # /tmp/claude-eval-XXXX (kept by --keep-temp)
        for path in [root, *root.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o700)
        shutil.rmtree(root, ignore_errors=True)
    (result,) = [line for line in lines if line.get("type") == "result"]
    return str(result.get("result", ""))


def test_without_a_bash_grant_both_runners_refuse_the_expansion(tmp_path: Path) -> None:
    repo = write_files(tmp_path, FILES)
    theirs, their_requests, their_answer = _cli(repo, "cli")
    ours, our_requests, said = _ours(repo, "ours")
    # The command's own allowed-tools grants nothing in either: no model request.
    assert their_requests == [] and our_requests == []
    assert their_answer == REFUSED.replace("\\n", "\n")
    assert theirs["passed"] is False and theirs["score"] == 0
    assert ours["status"] == "error"
    assert ours["error"] == "the model never ran: " + REFUSED.replace("\\n", " ")
    # Said before the run, with what to grant (the CLI says nothing).
    assert (
        'ci-evals: warning: case "st": its command expands shell commands before the model '
        "sees it, which the run refuses unless granted (as claude plugin eval does; the "
        "command's allowed-tools grants nothing in an eval run) \u2014 grant "
        "Bash(git status:*) with allow_tools or --allow-tools"
    ) in said.splitlines()


def test_the_commands_rule_granted_runs_the_expansion(tmp_path: Path) -> None:
    repo = write_files(tmp_path, FILES)
    ours, our_requests, said = _ours(repo, "ours", "--allow-tools", "Bash(git status:*)")
    assert ours["status"] == "passed", ours
    assert "expands shell commands" not in said
    (said,) = [
        block["text"]
        for message in our_requests[0]["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if "STATUS-SEEN" in block.get("text", "")
    ]
    # The expansion's output (a clean repository) in place of the block.
    assert "```!" not in said and "(Bash completed with no output)" in said
    theirs, _, _ = _cli(repo, "cli", "--allow-tools", "Bash(git status:*)")
    if shutil.which("socat") and shutil.which("bwrap"):
        assert theirs["error"] is None and theirs["passed"] is True, theirs
    else:  # the CLI's own sandbox is missing here: it refuses any Bash grant
        assert NO_CLI_SANDBOX in str(theirs["error"])


def test_init_drafts_the_commands_case_with_its_grant_and_runs_it_green(tmp_path: Path) -> None:
    # As commit-commands' /commit: its Bash rules in allowed-tools, `!`git status`` in its body.
    command = (
        "---\ndescription: Commit\nallowed-tools: Bash(git add:*), Bash(git status:*), Read\n"
        "---\n- Status: !`git status`\n\nCommit the staged changes.\n"
    )
    repo = plugin_repo(tmp_path, {"commands/commit.md": command})
    proc = cli(repo, "init", "plugin", "--format", "cases")
    assert proc.returncode == 0, proc.stderr
    assert "no case checks the command" not in proc.stdout
    case = yaml.safe_load((repo / "plugin/evals/command-commit/case.yaml").read_text())
    assert case["execution"]["allowed_tools"] == ["Bash(git add:*)", "Bash(git status:*)"]
    suite = yaml.safe_load((repo / "ci-evals.yaml").read_text())
    assert suite["plugin_evals"]["allow_tools"] == ["Bash(git add:*)", "Bash(git status:*)"]
    follow_printed_lines(repo, proc.stdout)  # check, then the stub run: green
    (results,) = (repo / ".ci-evals" / "runs").glob("*/results.json")
    ((stage,),) = [s["stages"] for s in json.loads(results.read_text())["scenarios"]]
    assert stage["status"] == "passed", stage


def test_init_grants_the_rule_to_existing_cases_invoking_the_command(tmp_path: Path) -> None:
    # A suite of cases already written (as a third party ships it): init's suite
    # grants what the commands they invoke expand, and its printed lines run green.
    repo = plugin_repo(
        tmp_path,
        {
            "commands/st.md": COMMAND,
            "evals/st/prompt.md": "---\nruns: 1\nmax_turns: 4\n---\n/shapes:st\n",
            "evals/st/graders/said.md": "---\ntype: regex\n---\nSTATUS-SEEN\n",
        },
    )
    proc = cli(repo, "init", "plugin")
    assert proc.returncode == 0, proc.stderr
    suite = yaml.safe_load((repo / "ci-evals.yaml").read_text())
    assert suite["plugin_evals"]["allow_tools"] == ["Bash(git status:*)"]
    follow_printed_lines(repo, proc.stdout)
    (results,) = (repo / ".ci-evals" / "runs").glob("*/results.json")
    ((stage,),) = [s["stages"] for s in json.loads(results.read_text())["scenarios"]]
    assert stage["status"] == "passed", stage
