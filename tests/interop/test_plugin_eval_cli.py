"""Results both ways against the real thing: documents the bundled `claude plugin eval`
wrote (offline, against the stub model: tests fake only the model, at its HTTP
boundary) import with the CLI's per-case scores, except where ci-evals fails closed;
a real `ci-evals run` of cases exported with `report --plugin-eval-json` imports
back to the same per-case verdicts and scores.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, load_script
from ci_evals.report.verify import problems
from ci_evals.results.model import read_results
from tests.run.test_run_command import ci_evals as run_ci_evals
from tests.run_helpers import plugin_eval
from tests.suite.test_plugin_evals_parity import STUB, _plugin

pytestmark = pytest.mark.slow


def ci_evals(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_ci_evals(*args, cwd=cwd, timeout=600)


def per_case(run_dir: Path) -> dict[str, tuple[str, float | None]]:
    """Each case's verdict and score (its runs' mean binary score / 100; None: no verdict)."""
    result = read_results(run_dir)
    assert problems(result) == []
    return {
        s.scenario: (
            s.summary.verdict,
            None if s.summary.binary_score.mean is None else s.summary.binary_score.mean / 100,
        )
        for s in result.summaries
    }


def _files(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# A case of negative graders only, twice: the stub answers late (the CLI times the run
# out, and still grades it: 1.00) or with an HTTP 400 (the CLI scores it 0 ungraded).
QUIET = {
    ".claude-plugin/plugin.json": '{"name": "quiet"}',
    "evals/quiet/graders/no-sorry.md": "---\ntype: regex\nmatch: not_contains\n---\nsorry\n",
    "evals/quiet/graders/no-file.md": "---\ntype: file_exists\npath: '*'\nexists: false\n---\n",
    "evals/quiet/graders/no-read.md": "---\ntype: tool_used\ntool: Read\nmin: 0\nmax: 0\n---\n",
}


def test_documents_of_the_real_cli_import_with_its_per_case_scores(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)  # every grader type and target, weights, runs: 2, tags
    (tmp_path / "stub.yaml").write_text(STUB)
    slow = _files(
        tmp_path / "slow",
        {**QUIET, "evals/quiet/prompt.md": "---\nruns: 1\ntimeout_seconds: 2\n---\nDo nothing.\n"},
    )
    down = _files(
        tmp_path / "down", {**QUIET, "evals/quiet/prompt.md": "---\nruns: 1\n---\nDo nothing.\n"}
    )
    (tmp_path / "slow.yaml").write_text(
        "rules:\n  - name: late\n    turns:\n      - {text: late, delay: 8}\n"
    )
    (tmp_path / "down.yaml").write_text(
        "rules:\n  - name: down\n    turns:\n      - fault: {http_status: 400}\n"
    )
    documents = {}
    for name, target, flags in (
        ("cases", plugin, ("--allow-tools", "Write", "--tag", "smoke", "yaml")),
        ("slow", slow, ()),
        ("down", down, ()),
    ):
        script = STUB if name == "cases" else (tmp_path / f"{name}.yaml").read_text()
        (tmp_path / f"{name}-stub.yaml").write_text(script)
        with StubServer(load_script(tmp_path / f"{name}-stub.yaml")) as server:
            out = tmp_path / f"{name}.json"
            done = plugin_eval(target, tmp_path / "home", server.url, *flags, "--json", str(out))
        assert out.is_file(), done.stdout + done.stderr
        documents[name] = (done.returncode, json.loads(out.read_text()))

    # The CLI's own verdicts: the timed-out run of negative graders is a 1.00 pass, exit 0.
    code, slow_doc = documents["slow"]
    (slow_run,) = slow_doc["cases"][0]["arms"]["with"]
    assert (code, slow_run["score"], slow_run["error"]) == (0, 1, "timed out after 2s")
    assert documents["down"][1]["cases"][0]["arms"]["with"][0]["graders"] == []

    imported = {}
    for name in documents:
        done = ci_evals(
            "import", "plugin-eval", f"{name}.json", "--out", f"run-{name}", cwd=tmp_path
        )
        assert done.returncode in (0, 1), done.stdout + done.stderr
        imported[name] = per_case(tmp_path / f"run-{name}")

    theirs = {c["name"]: c["aggregates"]["score"] for c in documents["cases"][1]["cases"]}
    assert theirs == {"hello": 1.0, "weighted": 0.8, "mixed": 1.0, "judged": 0.5}
    assert {case: score for case, (_, score) in imported["cases"].items()} == pytest.approx(theirs)
    assert {case: verdict for case, (verdict, _) in imported["cases"].items()} == {
        "hello": "passed",
        "weighted": "failed",
        "mixed": "passed",
        "judged": "failed",
    }
    # Where ci-evals fails closed: the CLI's 1.00 (and its ungraded 0) are errors.
    assert imported["slow"] == {"quiet": ("error", None)}
    assert imported["down"] == {"quiet": ("error", None)}
    assert ci_evals("report", "run-slow", "--markdown", "s.md", cwd=tmp_path).returncode == 1

    # Exported again, each imports to the same per-case verdicts and scores.
    for name in documents:
        exported = f"{name}-again.json"
        done = ci_evals(
            "report",
            f"run-{name}",
            "--markdown",
            "x.md",
            "--plugin-eval-json",
            exported,
            cwd=tmp_path,
        )
        assert done.returncode in (0, 1), done.stderr
        done = ci_evals("import", "plugin-eval", exported, "--out", f"again-{name}", cwd=tmp_path)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        assert per_case(tmp_path / f"again-{name}") == imported[name]


def test_a_with_without_document_keeps_the_arm_and_the_with_only_grader(tmp_path: Path) -> None:
    """`--ablation with-without`: a `tool_used: Skill` grader is with-only (advisory),
    the without-arm's runs and the CLI's delta are kept, and exported back."""
    plugin = _files(
        tmp_path / "p",
        {
            ".claude-plugin/plugin.json": '{"name": "p", "version": "1.2.0"}',
            "skills/greet/SKILL.md": (
                "---\nname: greet\ndescription: Greets a person\n---\nGreet them.\n"
            ),
            "evals/hi/prompt.md": "---\nruns: 2\n---\nGreet Alex.\n",
            "evals/hi/graders/said.md": "---\ntype: regex\n---\nHello\n",
            "evals/hi/graders/skill.md": "---\ntype: tool_used\ntool: Skill\n---\n",
        },
    )
    stub = tmp_path / "stub.yaml"
    stub.write_text(
        "rules:\n  - name: hi\n    match: {prompt_contains: Greet Alex}\n"
        "    turns:\n      - text: Hello Alex\n"
    )
    with StubServer(load_script(stub)) as server:
        # The helper asks for one arm; a later --ablation wins.
        done = plugin_eval(
            plugin,
            tmp_path / "home",
            server.url,
            "--ablation",
            "with-without",
            "--json",
            str(tmp_path / "d.json"),
        )
    document = json.loads((tmp_path / "d.json").read_text())
    assert document["suite"]["ablation"] == "with-without", done.stdout + done.stderr

    done = ci_evals("import", "plugin-eval", "d.json", "--out", "run", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    result = read_results(tmp_path / "run")
    (case,) = result.imported_from.cases  # type: ignore[union-attr]
    aggregates = document["cases"][0]["aggregates"]
    assert (case.score, case.score_without, case.delta) == (
        aggregates["score"],
        aggregates["scoreWithout"],
        aggregates["delta"],
    )
    assert len(case.without) == 2
    advisory = {c.id: c.advisory for c in result.scenarios[0].stages[0].grading.criteria}  # type: ignore[union-attr]
    assert advisory == {"said": False, "skill": True}

    done = ci_evals(
        "report", "run", "--markdown", "x.md", "--plugin-eval-json", "e.json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    exported = json.loads((tmp_path / "e.json").read_text())
    assert exported["suite"]["ablation"] == "with-without"
    assert exported["cases"][0]["aggregates"] == pytest.approx(aggregates)


def test_a_ci_evals_run_of_cases_exports_and_imports_to_the_same_scores(tmp_path: Path) -> None:
    """A real run of cases (the SDK in its sandbox, the stub model) as the CLI's
    document, and that document imported: the same verdict and score per case."""
    plugin = _plugin(tmp_path)
    (tmp_path / "stub.yaml").write_text(STUB)
    (tmp_path / "ci-evals.yaml").write_text(
        # The CLI's run above grants Write (--allow-tools): so does this suite.
        f"version: 1\nplugin: {plugin.name}\nplugin_evals:\n  tags: [smoke, yaml]\n"
        "  allow_tools: [Write]\n"
    )
    done = ci_evals("run", "--model", "stub:stub.yaml", "--out", "run", cwd=tmp_path)
    assert (tmp_path / "run" / "results.json").is_file(), done.stdout + done.stderr
    ours = per_case(tmp_path / "run")
    assert {case: score for case, (_, score) in ours.items()} == pytest.approx(
        {"hello": 1.0, "weighted": 0.8, "mixed": 1.0, "judged": 0.5}
    )

    done = ci_evals(
        "report", "run", "--markdown", "x.md", "--plugin-eval-json", "out.json", cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr  # weighted and judged fail
    document = json.loads((tmp_path / "out.json").read_text())
    assert {c["name"]: c["aggregates"]["score"] for c in document["cases"]} == pytest.approx(
        {"hello": 1.0, "weighted": 0.8, "mixed": 1.0, "judged": 0.5}
    )
    (judged,) = [c for c in document["cases"] if c["name"] == "judged"]
    assert {g["name"]: g["weight"] for g in judged["graders"]} == {
        "polite": 1,
        "named": 2,
        "warm": 1,
    }

    done = ci_evals("import", "plugin-eval", "out.json", "--out", "again", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert per_case(tmp_path / "again") == ours
