"""`plugin_evals:`: `claude plugin eval` cases found, read, merged and checked as the CLI does.

Plugins and suites are written here, in the shapes public suites use. The
CLI's own load check (`--max-cost-usd 0`: every case parsed, none run) is the
oracle for which cases are refused (slow: it spawns the bundled CLI).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.grading.kinds.plugin_eval import FileExists, Regex, ToolOrder, ToolUsed
from ci_evals.suite.load import load_suite
from ci_evals.suite.plugin_evals import case_glob, discover, load_case
from tests.run_helpers import plugin_eval


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _suite(tmp_path: Path, files: dict[str, str], key: str = "{}") -> Path:
    _write(tmp_path / "plugin", {".claude-plugin/plugin.json": '{"name": "p"}', **files})
    suite = tmp_path / "ci-evals.yaml"
    suite.write_text(f"version: 1\nplugin: plugin\nplugin_evals: {key}\n")
    return suite


GRADER = "---\ntype: regex\n---\nhi\n"


def test_a_mixed_case_merges_as_the_cli_does(tmp_path: Path) -> None:
    _write(
        tmp_path / "c",
        {
            "case.yaml": (
                'schema_version: "1.1"\nname: from-yaml\ntags: [a]\ndescription: d\n'
                "execution:\n  prompt: never\n  disallowed_tools: [Agent]\n  timeout_seconds: 60\n"
                "graders:\n  - {type: tool_used, name: first, tool: Read, max: 2}\n"
            ),
            "prompt.md": "---\nname: mixed\ntags: [b]\ndisallowed_tools: [Bash]\n---\n\n Body.\n",
            "graders/z-last.md": "---\ntype: file_exists\npath: out/*.md\n---\n",
            "graders/a-second.md": "---\ntype: tool_order\nbefore: Write\nafter: Read\n---\n",
            "graders/notes.md": "no front matter: not a grader\n",
        },
    )
    warnings: list[str] = []
    case = load_case(tmp_path / "c", warnings)
    assert (case.name, case.source, case.prompt, case.tags) == ("mixed", "mixed", "Body.", ("b",))
    assert case.disallowed_tools == ("Agent", "Bash")
    assert (case.runs, case.max_turns, case.timeout_s) == (3, 10, 60)
    assert [g.name for g in case.graders] == ["first", "a-second", "z-last"]
    assert [type(g) for g in case.graders] == [ToolUsed, ToolOrder, FileExists]
    assert warnings == []


def test_a_prose_case_takes_its_folder_name_and_the_defaults(tmp_path: Path) -> None:
    _write(tmp_path / "greet", {"prompt.md": "Greet.\n", "graders/g.md": GRADER})
    case = load_case(tmp_path / "greet", [])
    assert (case.name, case.source, case.runs, case.max_turns) == ("greet", "prose", 3, 10)
    grader = case.graders[0]
    assert isinstance(grader, Regex) and grader.pattern.source == "hi"
    assert (grader.target, grader.match, grader.weight) == ("last_message", "contains", 1.0)


_CTX = (
    'schema_version: "1.1"\nname: n\ncontext: {}\n'
    "execution: {{prompt: x}}\ngraders: [{{type: regex, name: r, pattern: x}}]\n"
)


@pytest.mark.parametrize(
    ("files", "where", "says"),
    [
        (
            {"prompt.md": "---\nmax_turns: 3\nturns: 4\n---\nx\n", "graders/g.md": GRADER},
            "prompt.md:3:8",
            'unknown frontmatter key "turns"',
        ),
        (
            {
                "case.yaml": 'schema_version: "1.1"\nname: n\nexecution: {prompt: x}\n'
                "graders:\n  - {type: regex, name: r, pattern: x, bogus: 1}\n",
            },
            "case.yaml:5:40",
            "unknown key 'bogus'",
        ),
        (
            {
                "case.yaml": 'schema_version: "2.0"\nname: n\nexecution: {prompt: x}\n'
                "graders: [{type: regex, name: r, pattern: x}]\n",
            },
            "case.yaml:1:17",
            "requires a newer version",
        ),
        (
            {"prompt.md": "---\nenv: {PATH: /x}\n---\nx\n", "graders/g.md": GRADER},
            "prompt.md:2:13",
            'execution.env key "PATH" is not allowed',
        ),
        (
            {
                "prompt.md": "x\n",
                "graders/a.md": GRADER,
                "graders/b.md": "---\nname: a\ntype: regex\n---\ny\n",
            },
            "prompt.md:1:1",
            'duplicate grader name "a"',
        ),
        (
            {
                "prompt.md": "---\nmax_turns: 10\n---\n\nTODO: describe what the agent should do\n",
                "graders/criteria.md": "---\ntype: llm\nweight: 1\n---\n\nTODO: describe what a "
                "successful response looks like\n",
            },
            "prompt.md:1:1",
            "still the blank `init` template",
        ),
        (
            {
                "prompt.md": "x\n",
                "graders/b.md": "---\ntype: baseline\nbaseline_file: base.jsonl\n---\nAs well.\n",
            },
            "graders/b.md:3:16",
            "baseline file base.jsonl does not exist",
        ),
        (
            {"prompt.md": "x\n", "graders/m.md": "---\ntype: regex\ntarget: mock_call\n---\nx\n"},
            "graders/m.md:3:9",
            "unknown target 'mock_call'",
        ),
        (
            {
                "case.yaml": 'schema_version: "1.1"\nname: n\ncontext: {scaffold_script: s.sh}\n'
                "execution: {prompt: x}\ngraders: [{type: regex, name: r, pattern: x}]\n",
            },
            "case.yaml:3:28",
            'case "n": path "s.sh" does not exist',
        ),
        (
            {
                "case.yaml": _CTX.format("{scaffold_script: ../s.sh}"),
                "../s.sh": "true\n",
            },
            "case.yaml:3:28",
            'path "../s.sh" escapes the case directory (`..` or an absolute path)',
        ),
        (
            {
                "case.yaml": 'schema_version: "1.1"\nname: n\ncontext: {history_file: h.jsonl}\n'
                "graders: [{type: regex, name: r, pattern: x}]\n",
                "h.jsonl": "{}\n",
            },
            "case.yaml:1:1",
            "context.history_file requires execution.prompt (the resumed session needs a next",
        ),
        (
            {"case.yaml": _CTX.format("{add_dirs: [.]}")},
            "case.yaml:3:22",
            "an add_dirs entry points inside a directory that holds case definitions",
        ),
        (
            {"case.yaml": _CTX.format("{add_dirs: [d.txt]}"), "d.txt": "x\n"},
            "case.yaml:3:22",
            'add_dirs entry "d.txt" is not a folder',
        ),
        (
            {"case.yaml": _CTX.format("{}").replace("context: {}", "plugins: [../other]")},
            "case.yaml:3:10",
            "the case loads other plugins than the suite's",
        ),
        (
            {"prompt.md": "---\nartifact_publish: true\n---\nx\n", "graders/g.md": GRADER},
            "prompt.md:2:19",
            "artifact_publish: true: the case publishes claude.ai artifacts",
        ),
        (
            {"prompt.md": "x\n", "graders/r.md": "---\ntype: regex\n---\n\\Z\n"},
            "graders/r.md:2:1",
            "JavaScript reads it as 'Z'",
        ),
        (
            {"prompt.md": "---\nruns: 51\n---\nx\n", "graders/g.md": GRADER},
            "prompt.md:2:7",
            "must be from 1 to 50",
        ),
        (
            {"prompt.md": "---\nruns: 2\nx\n", "graders/g.md": GRADER},
            "prompt.md:1",
            "unterminated frontmatter",
        ),
    ],
)
def test_a_mistake_is_one_line_at_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], where: str, says: str
) -> None:
    monkeypatch.chdir(tmp_path)  # paths in messages are named from the current folder
    _write(tmp_path / "c", files)
    with pytest.raises(UserError) as caught:
        load_case(tmp_path / "c", [])
    line = str(caught.value)
    assert "\n" not in line and says in line, line
    assert line.startswith(f"c/{where}:"), line


def test_what_the_cli_drops_is_a_warning_and_max_zero_alone_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(
        tmp_path / "c",
        {
            "case.yaml": 'schema_version: "1.1"\nname: n\nfoo: 1\n'
            "execution: {prompt: x, turns: 2}\n"
            "graders: [{type: tool_used, name: never, tool: Skill, max: 0}]\n",
        },
    )
    warnings: list[str] = []
    load_case(tmp_path / "c", warnings)
    assert len(warnings) == 3, warnings
    assert "c/case.yaml:3:6: foo: unknown key, ignored" in warnings[0]
    assert "case.yaml:4:31: turns: unknown key, ignored" in warnings[1]
    assert "`max: 0` without `min` can never pass" in warnings[2] and "min: 0" in warnings[2]


def test_discovery_finds_cases_as_the_cli_does(tmp_path: Path) -> None:
    evals = tmp_path / "evals"
    _write(
        evals,
        {
            "b/prompt.md": "x",
            "a/case.yaml": "x",
            "a/inner/prompt.md": "not descended into",
            "group/deep/prompt.md": "x",
            "results/r/prompt.md": "skipped",
            "mocks/m/prompt.md": "skipped",
            "node_modules/n/prompt.md": "skipped",
            ".claude/c/prompt.md": "skipped",
            ".GIT/g/prompt.md": "skipped",
            "empty/notes.txt": "no case",
            "/".join(f"d{i}" for i in range(17)) + "/prompt.md": "too deep",
        },
    )
    warnings: list[str] = []
    found = discover(evals, warnings, within=tmp_path)
    assert [p.relative_to(evals).as_posix() for p in found] == ["a", "b", "group/deep"]
    assert len(warnings) == 1 and "nested more than 16" in warnings[0]


@pytest.mark.parametrize(
    ("glob", "name", "matches"),
    [
        ("*", "anything", True),
        ("greet-*", "greet-alex", True),
        ("greet-?", "greet-a", True),
        ("greet-?", "greet-ab", False),
        ("[ab]", "a", False),
        ("[ab]", "[ab]", True),
        ("a.b", "axb", False),
    ],
)
def test_case_globs_know_star_and_question_mark_only(glob: str, name: str, matches: bool) -> None:
    assert bool(case_glob(glob).fullmatch(name)) is matches


def test_the_suite_selects_cases_by_glob_and_any_tag(tmp_path: Path) -> None:
    files = {
        f"evals/{name}/prompt.md": f"---\ntags: [{tag}]\n---\nDo {name}.\n"
        for name, tag in (("one", "smoke"), ("two", "slow"), ("three", "yaml"))
    }
    files |= {f"evals/{name}/graders/g.md": GRADER for name in ("one", "two", "three")}
    suite = load_suite(_suite(tmp_path, files, "{cases: ['t*', one], tags: [smoke, yaml]}"))
    assert [s.id for s in suite.scenarios] == ["one", "three"]
    assert suite.stages == ()
    stage = suite.scenarios[0].stage
    assert stage is not None and stage.prompt.render({}) == "Do one."
    assert suite.scenarios[0].repeat == 3 and stage.limits.max_turns == 10


def test_the_eval_folder_comes_from_the_manifest(tmp_path: Path) -> None:
    _write(
        tmp_path / "plugin",
        {"quality/evals/c/prompt.md": "Go {now}.", "quality/evals/c/graders/g.md": GRADER},
    )
    (tmp_path / "plugin/.claude-plugin").mkdir()
    (tmp_path / "plugin/.claude-plugin/plugin.json").write_text(
        '{"name": "p", "experimental": {"evals": "quality/evals"}}'
    )
    (tmp_path / "ci-evals.yaml").write_text("version: 1\nplugin: plugin\nplugin_evals:\n")
    suite = load_suite(tmp_path / "ci-evals.yaml")
    assert suite.plugin_evals is not None
    assert suite.plugin_evals.dir == tmp_path / "plugin/quality/evals"
    stage = suite.scenarios[0].stage
    assert stage is not None and stage.prompt.render({}) == "Go {now}."  # braces are literal


def test_a_bad_case_stops_ci_evals_run_with_one_line_and_exit_2(tmp_path: Path) -> None:
    suite = _suite(
        tmp_path, {"evals/c/prompt.md": "---\nturn: 1\n---\nx\n", "evals/c/graders/g.md": GRADER}
    )
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "--suite", str(suite), "--model", "stub:none"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert re.match(
        r"ci-evals: error: plugin/evals/c/prompt\.md:2:7: turn: unknown frontmatter key \"turn\"",
        lines[0],
    )


# Each case folder: does claude plugin eval refuse it at load? ci-evals must agree
# (what ci-evals does not run yet is refused too, and listed apart).
LOAD_CHECK = {
    "ok-prose": ({"prompt.md": "---\ntags: [a]\n---\nx\n", "graders/g.md": GRADER}, False),
    "ok-unknown-top": (
        {
            "case.yaml": 'schema_version: "1.1"\nname: ok-unknown-top\nfoo: 1\n'
            "execution: {prompt: x, bar: 2}\ngraders: [{type: regex, name: r, pattern: x}]\n"
        },
        False,
    ),
    "ok-float-turns": (
        {"prompt.md": "---\nmax_turns: 10.0\n---\nx\n", "graders/g.md": GRADER},
        False,
    ),
    "bad-fm-key": ({"prompt.md": "---\nturns: 3\n---\nx\n", "graders/g.md": GRADER}, True),
    "bad-no-graders": ({"prompt.md": "x\n"}, True),
    "bad-grader-key": (
        {"prompt.md": "x\n", "graders/g.md": "---\ntype: regex\nbogus: 1\n---\nx\n"},
        True,
    ),
    "bad-flags": (
        {"prompt.md": "x\n", "graders/g.md": "---\ntype: regex\nflags: ix\n---\nx\n"},
        True,
    ),
    "bad-weight": (
        {"prompt.md": "x\n", "graders/g.md": "---\ntype: regex\nweight: 0\n---\nx\n"},
        True,
    ),
    "bad-runs": ({"prompt.md": "---\nruns: 0\n---\nx\n", "graders/g.md": GRADER}, True),
    "bad-turns": ({"prompt.md": "---\nmax_turns: 201\n---\nx\n", "graders/g.md": GRADER}, True),
    "bad-tags": ({"prompt.md": "---\ntags: smoke\n---\nx\n", "graders/g.md": GRADER}, True),
    "bad-version": (
        {
            "case.yaml": 'schema_version: "2.0"\nname: v\nexecution: {prompt: x}\n'
            "graders: [{type: regex, name: r, pattern: x}]\n"
        },
        True,
    ),
    "bad-version-number": (
        {
            "case.yaml": "schema_version: 1.1\nname: v\nexecution: {prompt: x}\n"
            "graders: [{type: regex, name: r, pattern: x}]\n"
        },
        True,
    ),
    "bad-duplicate": (
        {
            "prompt.md": "x\n",
            "graders/a.md": GRADER,
            "graders/b.md": "---\nname: a\ntype: regex\n---\ny\n",
        },
        True,
    ),
    "bad-match": (
        {"prompt.md": "x\n", "graders/g.md": "---\ntype: regex\nmatch: count:x\n---\nx\n"},
        True,
    ),
    "bad-target-key": (
        {
            "prompt.md": "x\n",
            "graders/g.md": "---\ntype: regex\ntarget: {source: file, path: a, x: 1}\n---\nx\n",
        },
        True,
    ),
    "bad-no-type": ({"prompt.md": "x\n", "graders/g.md": "---\nweight: 1\n---\nx\n"}, True),
}


@pytest.mark.slow
def test_ci_evals_refuses_at_load_what_claude_plugin_eval_refuses(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    _write(plugin, {".claude-plugin/plugin.json": '{"name": "p"}'})
    for name, (files, _) in LOAD_CHECK.items():
        _write(plugin / "evals" / name, files)
    done = plugin_eval(
        plugin, tmp_path / "home", "http://127.0.0.1:9", "--max-cost-usd", "0", timeout=300
    )
    refused_by_cli = set(re.findall(r"✗ \S*/evals/([^/:\s]+)", done.stdout + done.stderr))
    ours = set()
    for name in LOAD_CHECK:
        try:
            load_case(plugin / "evals" / name, [])
        except UserError:
            ours.add(name)
    expected = {name for name, (_, bad) in LOAD_CHECK.items() if bad}
    assert refused_by_cli == expected, done.stdout + done.stderr
    assert ours == expected


def test_a_context_is_read_and_a_resumed_case_is_single_arm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each path inside the case folder, as the CLI checks them; `plugins:` naming the
    plugin itself is what the CLI finds anyway; a history makes the case single-arm."""
    monkeypatch.chdir(tmp_path)
    plugin = tmp_path / "p"
    _write(
        plugin,
        {
            ".claude-plugin/plugin.json": '{"name": "p"}',
            "evals/c/case.yaml": 'schema_version: "1.1"\nname: c\nplugins: [../..]\n'
            "context: {scaffold_script: s.sh, history_file: h/h.jsonl, add_dirs: [f, ./g]}\n"
            "execution: {prompt: x}\ngraders: [{type: regex, name: r, pattern: x}]\n",
            "evals/c/s.sh": "true\n",
            "evals/c/h/h.jsonl": "{}\n",
            "evals/c/f/a.txt": "a\n",
            "evals/c/g/b.txt": "b\n",
            "evals/d/prompt.md": "x\n",
            "evals/d/graders/g.md": GRADER,
        },
    )
    case = load_case(plugin / "evals" / "c", [], plugin_dir=plugin)
    assert case.context is not None and case.single_arm
    assert (case.context.scaffold_script, case.context.history_file) == ("s.sh", "h/h.jsonl")
    assert case.context.add_dirs == ("f", "g")
    plain = load_case(plugin / "evals" / "d", [], plugin_dir=plugin)
    assert plain.context is None and not plain.single_arm
    (plugin / "evals" / "c" / "s.sh").unlink()
    (plugin / "evals" / "c" / "s.sh").symlink_to(tmp_path / "outside.sh")
    (tmp_path / "outside.sh").write_text("true\n")
    with pytest.raises(UserError, match="resolves \\(through a link\\) outside the case"):
        load_case(plugin / "evals" / "c", [], plugin_dir=plugin)
