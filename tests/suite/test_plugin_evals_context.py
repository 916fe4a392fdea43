"""A case's `context:` (scaffold_script, history_file, add_dirs), run by the bundled
`claude plugin eval` and by ci-evals against one stub model: the same per-case
scores; and what ci-evals adds: the scaffold runs in the sandbox and reaches
nothing of the host, add_dirs are read-only and the rest of the case is hidden,
the plugin's tree is never written (the CLI writes a resumed case's transcript
into it), a failing scaffold makes the case an `error` naming it.

The history is made by the same bundled CLI (`claude -p` against the stub), so it
is a transcript the CLI really resumes. Tests fake only the model, at its HTTP
boundary.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, load_script
from tests.run_helpers import bundled_cli, plugin_eval

pytestmark = pytest.mark.slow

FILES = {
    ".claude-plugin/plugin.json": '{"name": "ctx"}\n',
    # The scaffold reads a file beside it, commits two files; the agent writes
    # out.txt and rewrites mod.txt: only out.txt is created (5 of 6 graders pass).
    "evals/scaf/case.yaml": """\
schema_version: "1.1"
name: scaf
runs: 1
tags: [ctx]
context:
  scaffold_script: seed.sh
execution:
  prompt: "Write out.txt and update mod.txt."
  max_turns: 4
graders:
  - {type: file_exists, name: made-out, path: out.txt}
  - {type: file_exists, name: pre-not-created, path: pre.txt, exists: false}
  - {type: file_exists, name: mod-not-created, path: "*.txt", exists: true}
  - {type: regex, name: one-created, target: files, pattern: "^", flags: m, match: "count:1"}
  - {type: regex, name: template-laid, target: {source: file, path: pre.txt}, pattern: "template"}
  - {type: file_exists, name: pre-created, path: pre.txt}
""",
    "evals/scaf/seed.sh": (
        'set -e\ncp "$(dirname "$0")/template.txt" pre.txt\necho keep > mod.txt\n'
        "git add pre.txt mod.txt\ngit commit -qm seed\n"
    ),
    "evals/scaf/template.txt": "from the template\n",
    "evals/hist/case.yaml": """\
schema_version: "1.1"
name: hist
runs: 2
tags: [ctx]
context:
  history_file: history.jsonl
execution:
  prompt: "What was the word?"
  max_turns: 2
graders:
  - {type: regex, name: recalls, pattern: "pineapple"}
  - {type: regex, name: in-trace, target: trace, pattern: "The word was pineapple"}
""",
    "evals/dirs/case.yaml": """\
schema_version: "1.1"
name: dirs
runs: 1
tags: [ctx]
context:
  add_dirs: [fixtures]
execution:
  prompt: "Summarise the fixture."
  max_turns: 2
graders:
  - {type: regex, name: summary, pattern: "fixture summarised"}
""",
    "evals/dirs/fixtures/data.txt": "fixture data\n",
}

STUB = """\
rules:
  - name: scaf
    match: {prompt_contains: "Write out.txt"}
    turns:
      - tools:
          - write: {path: out.txt, content: "hi\\n"}
      - tools:
          - write: {path: mod.txt, content: "changed\\n"}
      - text: "done"
  # The resumed case: its first user message is the history's, one turn answered.
  - name: hist
    match: {prompt_contains: "Remember the word"}
    turns:
      - text: "I will remember: pineapple."
      - text: "The word was pineapple."
  - name: dirs
    match: {prompt_contains: "Summarise the fixture"}
    turns:
      - text: "fixture summarised"
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _history(url: str, scratch: Path) -> str:
    """A session transcript, as the bundled CLI writes one: its first turn."""
    home, cwd = scratch / "home", scratch / "home" / "w"
    cwd.mkdir(parents=True)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    argv = [str(bundled_cli()), "-p", "Remember the word pineapple."]
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (transcript,) = (home / ".claude" / "projects").glob("*/*.jsonl")
    return transcript.read_text()


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _ci_evals(cwd: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=cwd,
        env=env,
    )
    results = cwd / "run" / "results.json"
    assert results.is_file(), done.stdout + done.stderr
    document: dict[str, object] = json.loads(results.read_text())
    return document


def _scores(document: dict[str, object]) -> dict[str, float]:
    summaries = document["summaries"]
    assert isinstance(summaries, list)
    return {s["scenario"]: s["summary"]["binary_score"]["mean"] / 100 for s in summaries}


def test_the_cli_and_ci_evals_score_scaffold_history_and_add_dirs_alike(tmp_path: Path) -> None:
    stub = tmp_path / "stub.yaml"
    stub.write_text(STUB)
    ours_dir, theirs_dir = tmp_path / "ours" / "ctx", tmp_path / "theirs" / "ctx"
    with StubServer(load_script(stub)) as server:
        history = _history(server.url, tmp_path / "h")
        for plugin in (ours_dir, theirs_dir):
            _write(plugin, {**FILES, "evals/hist/history.jsonl": history})
        out = tmp_path / "cli.json"
        flags = ("--scaffold", "--allow-tools", "Write", "--json", str(out))
        cli = plugin_eval(theirs_dir, tmp_path / "cli-home", server.url, *flags)
    assert out.is_file(), cli.stdout + cli.stderr
    theirs = {}
    for case in json.loads(out.read_text())["cases"]:
        assert list(case["arms"]) == ["with"]  # a resumed case runs single-arm
        for run in case["arms"]["with"]:
            assert run["error"] is None, (case["name"], run["error"])
        theirs[case["name"]] = case["aggregates"]["score"]
    assert theirs == {"scaf": pytest.approx(5 / 6), "hist": 1.0, "dirs": 1.0}
    # The CLI wrote the resumed session's transcript into the plugin's case folder (F1).
    assert len(list((theirs_dir / "evals" / "hist").glob("*.jsonl"))) == 2

    before = _tree(ours_dir)
    suite = ours_dir.parent / "ci-evals.yaml"
    suite.write_text("version: 1\nplugin: ctx\nplugin_evals: {tags: [ctx], allow_tools: [Write]}\n")
    document = _ci_evals(ours_dir.parent, "run", "--model", f"stub:{stub}", "--out", "run")
    assert _scores(document) == pytest.approx(theirs)
    assert _tree(ours_dir) == before  # never written: no transcript, no results
    (scaf,) = (ours_dir.parent / "run").glob("scaf/1-scaf")
    assert json.loads((scaf / "scaffold-files.json").read_text()) == ["mod.txt", "pre.txt"]
    assert "$ bash seed.sh  (exit 0" in (scaf / "scaffold.log").read_text()


def _repository(root: Path, files: dict[str, str]) -> None:
    _write(root, files)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "x"],
        cwd=root,
        check=True,
        capture_output=True,
    )


def test_a_scaffold_runs_in_the_sandbox_and_reaches_nothing_of_the_host(tmp_path: Path) -> None:
    """The scaffold, told to cheat: it reads the repository's secret by its absolute
    path, lists the run folder, greps every process's environment for the key, and
    writes a file on the host. In the bwrap sandbox none of it works; what it saw is
    in the workspace it leaves, and the host file is never made."""
    repo = tmp_path / "repo"
    marker = tmp_path / "written-by-the-scaffold"
    key = "sk-ant-api03-the-real-key"
    probe = f"""\
{{
  echo "pid $$"
  env
  cat {repo}/secret.txt && echo READ-THE-SECRET
  ls {repo}/run && echo LISTED-THE-RUN
  ls {repo}/.git && echo LISTED-THE-GIT
  grep -l {key} /proc/*/environ && echo FOUND-THE-KEY
  touch {marker} && echo WROTE-THE-HOST
}} > probe.txt 2>&1
true
"""
    _repository(
        repo,
        {
            "secret.txt": "the repository's secret\n",
            "ci-evals.yaml": "version: 1\nplugin: p\nplugin_evals: {}\n",
            "stub.yaml": 'rules:\n  - name: any\n    turns: [{text: "done"}]\n',
            "p/.claude-plugin/plugin.json": '{"name": "p"}\n',
            "p/evals/c/case.yaml": (
                'schema_version: "1.1"\nname: c\nruns: 1\ncontext: {scaffold_script: s.sh}\n'
                "execution: {prompt: Go.}\n"
                "graders: [{type: file_exists, name: nothing-created, path: '**', "
                "exists: false}]\n"
            ),
            "p/evals/c/s.sh": probe,
        },
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": key}
    args = ("run", "--model", "stub:stub.yaml", "--isolation", "bwrap", "--out", "run")
    document = _ci_evals(repo, *args, env=env)
    assert document["sandbox"] == "bwrap"
    (stage,) = document["scenarios"][0]["stages"]  # type: ignore[index]
    assert stage["status"] == "passed", stage  # what the scaffold left is not created
    seen = (repo / "run" / "c" / "1-c" / "after" / "probe.txt").read_text()
    assert "pid " in seen and "TERM=dumb" in seen, seen
    for word in ("READ-THE-SECRET", "LISTED-THE", "FOUND-THE-KEY", "WROTE-THE-HOST", key):
        assert word not in seen, seen
    assert "ANTHROPIC" not in seen and "TOKEN" not in seen, seen  # no endpoint, no token
    assert not marker.exists()


def test_a_failing_scaffold_makes_the_case_an_error_naming_it(tmp_path: Path) -> None:
    _repository(
        tmp_path,
        {
            "ci-evals.yaml": "version: 1\nplugin: p\nplugin_evals: {}\n",
            # Never asked: the model is not reached.
            "stub.yaml": 'rules:\n  - name: any\n    turns: [{text: "done"}]\n',
            "p/.claude-plugin/plugin.json": '{"name": "p"}\n',
            "p/evals/c/prompt.md": "---\nruns: 1\n---\nGo.\n",
            "p/evals/c/graders/g.md": "---\ntype: file_exists\npath: x\nexists: false\n---\n",
            "p/evals/c/case.yaml": (
                'schema_version: "1.1"\nname: c\ncontext: {scaffold_script: seed.sh}\n'
            ),
            "p/evals/c/seed.sh": "echo half-made > half.txt\necho 'no template here' >&2\nexit 3\n",
        },
    )
    document = _ci_evals(tmp_path, "run", "--model", "stub:stub.yaml", "--out", "run")
    (stage,) = document["scenarios"][0]["stages"]  # type: ignore[index]
    assert stage["status"] == "error" and stage["grading"] is None, stage
    assert stage["error"] == (
        "scaffold failed (exit 3): seed.sh: no template here (its output: scaffold.log)"
    )
    assert document["summaries"][0]["summary"]["verdict"] == "error"  # type: ignore[index]
    log = (tmp_path / "run" / "c" / "1-c" / "scaffold.log").read_text()
    assert "(exit 3," in log and "no template here" in log


def test_add_dirs_are_read_only_and_the_rest_of_the_case_is_hidden(tmp_path: Path) -> None:
    """The agent finds the add_dir beside its workspace (`../case/<dir>`), reads it,
    cannot write it, and sees nothing else of the case: not its graders."""
    script = (
        "cat ../case/fixtures/data.txt > seen.txt; "
        "{ echo more >> ../case/fixtures/data.txt; } 2> wrote.txt; "
        "ls -A ../case > listing.txt; cat ../case/case.yaml > leaked.txt 2>&1; true"
    )
    _repository(
        tmp_path,
        {
            "ci-evals.yaml": "version: 1\nplugin: p\nplugin_evals: {allow_tools: [Bash]}\n",
            "stub.yaml": (
                "rules:\n  - name: look\n    turns:\n"
                f"      - tools: [{{bash: {json.dumps(script)}}}]\n"
                '      - text: "looked"\n'
            ),
            "p/.claude-plugin/plugin.json": '{"name": "p"}\n',
            "p/evals/c/case.yaml": """\
schema_version: "1.1"
name: c
runs: 1
context: {add_dirs: [fixtures]}
execution: {prompt: Look.}
graders:
  - {type: regex, name: read, target: {source: file, path: seen.txt}, pattern: "^fixture data"}
  - type: regex
    name: not-written
    target: {source: file, path: wrote.txt}
    pattern: "Read-only|Permission denied"
  - {type: regex, name: only-it, target: {source: file, path: listing.txt},
     pattern: "^fixtures\\n$"}
  - {type: regex, name: hidden, target: {source: file, path: leaked.txt}, pattern: "No such file"}
""",
            "p/evals/c/fixtures/data.txt": "fixture data\n",
        },
    )
    args = ("run", "--model", "stub:stub.yaml", "--isolation", "bwrap", "--out", "run")
    document = _ci_evals(tmp_path, *args)
    (stage,) = document["scenarios"][0]["stages"]  # type: ignore[index]
    criteria = {c["id"]: c["detail"] for c in stage["grading"]["graders"][0]["criteria"]}
    assert stage["status"] == "passed", criteria
    assert (tmp_path / "p/evals/c/fixtures/data.txt").read_text() == "fixture data\n"
    shutil.rmtree(tmp_path / "run")


def test_a_scaffold_past_its_time_is_killed_and_the_case_an_error(tmp_path: Path) -> None:
    """The CLI's 120 s: then everything the scaffold started is killed (a process in
    the background too), and the case is an `error` naming the script."""
    _repository(
        tmp_path,
        {
            "ci-evals.yaml": "version: 1\nplugin: p\nplugin_evals: {}\n",
            "stub.yaml": 'rules:\n  - name: any\n    turns: [{text: "done"}]\n',
            "p/.claude-plugin/plugin.json": '{"name": "p"}\n',
            "p/evals/c/case.yaml": (
                'schema_version: "1.1"\nname: c\nruns: 1\ncontext: {scaffold_script: slow.sh}\n'
                "execution: {prompt: Go.}\ngraders: [{type: regex, name: r, pattern: x}]\n"
            ),
            "p/evals/c/slow.sh": "(sleep 900; touch late.txt) &\necho waiting >&2\nsleep 900\n",
        },
    )
    args = ("run", "--model", "stub:stub.yaml", "--isolation", "bwrap", "--out", "run")
    document = _ci_evals(tmp_path, *args)  # within its 600 s, not the script's 900 s
    (stage,) = document["scenarios"][0]["stages"]  # type: ignore[index]
    assert stage["status"] == "error", stage
    assert stage["error"] == (
        "scaffold failed (timed out after 120 s): slow.sh (its output: scaffold.log)"
    )
    assert "waiting" in (tmp_path / "run" / "c" / "1-c" / "scaffold.log").read_text()
    assert not [cmd for cmd in _cmdlines() if cmd == b"sleep\x00900\x00"]  # none left


def _cmdlines() -> list[bytes]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.append((entry / "cmdline").read_bytes())
            except OSError:
                continue
    return found
