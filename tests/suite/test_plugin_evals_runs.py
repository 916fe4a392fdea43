"""A run of several `claude plugin eval` cases, each with its own `runs`, is one
consistent run for every reader: `report` (Markdown, JUnit, HTML), `grade`, and
`merge` of its shards.

Each case unit runs its own `runs` (1, 2, and the default 3) in its own stage;
results.json records both per scenario (`repeats`, `unit: case`), and every
reader takes a scenario's runs from there, not from the run's `repeat` (here 1).
A real git repository, the real SDK in its sandbox against the stub model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FILES = {
    "p/.claude-plugin/plugin.json": '{"name": "p"}\n',
    "p/evals/one/prompt.md": "---\nruns: 1\n---\nSay one.\n",
    "p/evals/one/graders/said.md": "---\ntype: regex\n---\none\n",
    "p/evals/two/prompt.md": "---\nruns: 2\n---\nSay two.\n",
    "p/evals/two/graders/said.md": "---\ntype: regex\n---\ntwo\n",
    "p/evals/three/prompt.md": "Say three.\n",  # runs: 3, the CLI's default
    "p/evals/three/graders/said.md": "---\ntype: regex\n---\nthree\n",
    "ci-evals.yaml": "version: 1\nplugin: p\nplugin_evals: {}\n",
    "stub.yaml": "rules:\n"
    + "".join(
        f'  - name: {n}\n    match: {{prompt_contains: "Say {n}"}}\n    turns: [{{text: "{n}"}}]\n'
        for n in ("one", "two", "three")
    ),
}
RUNS = {"one": 1, "two": 2, "three": 3}


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "cases")
    return tmp_path


def _ci_evals(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=repo,
    )


def _runs(results: Path) -> dict[str, list[int]]:
    """Each scenario's recorded runs: its repeats' 1-based numbers, checked against
    its recorded count."""
    document = json.loads(results.read_text())
    seen: dict[str, list[int]] = {}
    for scenario in document["scenarios"]:
        assert scenario["unit"] == "case" and scenario["repeats"] == RUNS[scenario["id"]]
        seen.setdefault(scenario["id"], []).append(scenario["repeat"] + 1)
    return seen


def _assert_reports_the_runs(repo: Path, run: str) -> None:
    done = _ci_evals(repo, "report", run, "--markdown", f"{run}.md", "--junit", f"{run}.xml")
    assert done.returncode == 0, done.stdout + done.stderr
    markdown = (repo / f"{run}.md").read_text()
    assert markdown.startswith("## ci-evals: passed\n"), markdown
    assert "3 scenario(s) x 1 to 3 repeats, 6 stage run(s): 6 passed" in markdown
    for line in (
        "### one\n",
        "### two#2\n",
        "### three#3\n",
        "| three | 1 three | passed | 3 of 3 runs passed (needs 3) |",
        "| two | 1 two | passed | 2 of 2 runs passed (needs 2) |",
        "| one | 1 one | passed | 1 of 1 runs passed (needs 1) |",
    ):
        assert line in markdown, markdown
    assert "### one#" not in markdown
    junit = (repo / f"{run}.xml").read_text()
    assert 'failures="0"' in junit and 'errors="0"' in junit
    done = _ci_evals(repo, "report", run, "--html", f"{run}-html")
    assert done.returncode == 0, done.stdout + done.stderr
    index = (repo / f"{run}-html" / "index.html").read_text()
    assert "Scenario three#3" in index and "Scenario one<" in index and "1 to 3" in index


def test_report_grade_and_merge_read_each_cases_own_runs(repo: Path) -> None:
    done = _ci_evals(repo, "run", "--model", "stub:stub.yaml", "--out", "run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "three#3 stage 1 three: pass" in done.stderr
    assert _runs(repo / "run" / "results.json") == {"one": [1], "two": [1, 2], "three": [1, 2, 3]}
    assert (repo / "run/one/1-one/trajectory.jsonl").is_file()
    assert (repo / "run/three/r3/1-three/trajectory.jsonl").is_file()
    _assert_reports_the_runs(repo, "run")

    # Re-graded under a case's changed grader: each of its three runs fails, the rest stand.
    (repo / "p/evals/three/graders/said.md").write_text("---\ntype: regex\n---\nfour\n")
    done = _ci_evals(repo, "grade", "run", "--output", "graded.json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "three#3 stage 1 three: passed -> failed" in done.stdout
    graded = json.loads((repo / "graded.json").read_text())
    verdicts = {s["scenario"]: s["summary"]["reason"] for s in graded["summaries"]}
    assert verdicts == {
        "one": "1 of 1 runs passed (needs 1)",
        "two": "2 of 2 runs passed (needs 2)",
        "three": "0 of 3 runs passed (needs 3)",
    }
    (repo / "p/evals/three/graders/said.md").write_text(FILES["p/evals/three/graders/said.md"])

    # Sharded: the plan counts each case's own runs (six units), the merge reads as one run.
    done = _ci_evals(repo, "plan", "--shards", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "shard 1/2: 3 unit(s)" in done.stderr and "shard 2/2: 3 unit(s)" in done.stderr
    for index in (1, 2):
        done = _ci_evals(
            repo, "run", "--model", "stub:stub.yaml", "--shard", f"{index}/2", "--out", f"s{index}"
        )
        assert done.returncode == 0, done.stdout + done.stderr
    done = _ci_evals(repo, "merge", "s1", "s2", "--out", "merged")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 unit(s)" in done.stdout + done.stderr
    assert _runs(repo / "merged" / "results.json") == {
        "one": [1],
        "two": [1, 2],
        "three": [1, 2, 3],
    }
    _assert_reports_the_runs(repo, "merged")


OUTSIDE_PROMPT = "---\nruns: 1\n---\nOUTSIDE-PROMPT-7f3a say one\n"


@pytest.mark.parametrize(
    ("way", "refusal"),
    [
        ("dir: ../outside", "lies outside"),
        ("dir: ABS", "is an absolute path"),
        ("experimental.evals: ABS", "is an absolute path"),
        ("experimental.evals: ../../outside", "lies outside"),
        ("a link in the eval folder", "is a link to"),
    ],
)
def test_an_eval_folder_or_a_case_outside_the_repository_is_refused(
    tmp_path: Path, way: str, refusal: str
) -> None:
    """Cases from outside the repository (a `dir:`, the manifest's
    `experimental.evals`, a link in the eval folder) would be read on the host and
    their prompts sent to the model: `check` and `run` refuse the suite first."""
    outside = tmp_path / "outside"
    (outside / "leak" / "graders").mkdir(parents=True)
    (outside / "leak" / "prompt.md").write_text(OUTSIDE_PROMPT)
    (outside / "leak" / "graders" / "g.md").write_text("---\ntype: regex\n---\none\n")
    root = tmp_path / "r"
    files = {
        "p/.claude-plugin/plugin.json": '{"name": "p"}\n',
        "ci-evals.yaml": "version: 1\nplugin: p\nplugin_evals: {}\n",
        "stub.yaml": "rules:\n  - match: {prompt_contains: one}\n    turns: [{text: one}]\n",
        "cases/one/prompt.md": "Say one.\n",
        "cases/one/graders/said.md": "---\ntype: regex\n---\none\n",
    }
    if way.startswith("dir"):
        given = str(outside) if "ABS" in way else "../outside"
        files["ci-evals.yaml"] = f"version: 1\nplugin: p\nplugin_evals: {{dir: '{given}'}}\n"
    elif way.startswith("experimental"):
        given = str(outside) if "ABS" in way else "../../outside"
        files["p/.claude-plugin/plugin.json"] = json.dumps(
            {"name": "p", "experimental": {"evals": given}}
        )
    else:
        files["ci-evals.yaml"] = "version: 1\nplugin: p\nplugin_evals: {dir: cases}\n"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if way.startswith("a link"):
        (root / "cases" / "x").symlink_to(outside / "leak")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "cases")
    for command in (("check",), ("run", "--out", "out")):
        done = _ci_evals(root, *command, "--model", "stub:stub.yaml")
        assert done.returncode == 2, done.stdout + done.stderr
        assert refusal in done.stderr, done.stderr
        assert "OUTSIDE-PROMPT" not in done.stdout + done.stderr
    assert not (root / "out" / "results.json").exists()
