"""Grading cost vs the plain work it wraps, on the same machine.

- scorecard: `parse_scorecard` on a realistic reviewer message (prose, then a
  fenced 30-criterion array) vs `json.loads` of the bare array;
- checks: `run_checks` (files count, headings, JSON Schema, equals_length) over
  a workspace of N files vs reading the same files with plain Python;
- command: `run_command_grader` of `true` vs `subprocess.run(["true"])`.

    .venv/bin/python benchmarks/bench_grading.py [--files 10000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timing import median_seconds
from ci_evals.config import yaml_source
from ci_evals.grading.kinds.checks.load import load_checks
from ci_evals.grading.kinds.checks.run import run_checks
from ci_evals.grading.kinds.command import CommandGrader, run_command_grader
from ci_evals.grading.reviewer.scorecard import parse_scorecard


def report(name: str, ours: float, base: float) -> None:
    ratio = ours / base
    print(f"{name:<10} ours {ours * 1e3:9.2f} ms   baseline {base * 1e3:9.2f} ms   x{ratio:.2f}")


def bench_scorecard(repeats: int) -> None:
    card = [
        {"criterion": f"c{i}", "score": 1 + i % 5, "type": "analytic", "rationale": "r" * 200}
        for i in range(30)
    ]
    body = json.dumps(card, indent=2)
    text = ("I read the lab [all files] and scored it. " * 50) + "\n```json\n" + body + "\n```\n"
    ours = median_seconds(lambda: [parse_scorecard(text, None) for _ in range(100)], repeats)
    base = median_seconds(lambda: [json.loads(body) for _ in range(100)], repeats)
    print(f"scorecard: {len(text)} chars, 30 criteria, x100 per sample")
    report("scorecard", ours, base)


def make_workspace(root: Path, files: int) -> None:
    chapters = root / "lab" / "chapters"
    chapters.mkdir(parents=True)
    for i in range(files):
        if i % 10 == 0:
            (chapters / f"{i:05d}-c.md").write_text("# T\n\n## Steps\ntext\n\n## Check\n" * 5)
        else:
            sub = root / "data" / f"{i % 100:02d}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"{i}.json").write_text(json.dumps({"n": 2, "items": [1, 2]}))
    (root / "lab" / "plan.json").write_text(json.dumps({"n": 2, "items": [1, 2]}))


def bench_checks(files: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        make_workspace(root, files)
        checks = load_checks(
            yaml_source.loads(
                "- { files: 'lab/chapters/*.md', min: 1 }\n"
                "- { headings: 'lab/chapters/*.md', require: ['## Steps', Check] }\n"
                "- { json_schema: 'data/**/*.json', schema: { type: object,"
                " required: [n, items] } }\n"
                "- { equals_length: lab/plan.json, field: n, array: items }\n",
                "bench.yaml",
            ),
            suite_dir=Path(tmp),
            plugin_dir=Path(tmp),
            within=Path(tmp),
        )
        run_checks(checks, root)  # warm: imports, page cache

        def baseline() -> None:
            for dirpath, _, names in os.walk(root):
                for name in names:
                    text = Path(dirpath, name).read_text()
                    if name.endswith(".json"):
                        json.loads(text)

        ours = median_seconds(lambda: run_checks(checks, root), repeats)
        base = median_seconds(baseline, repeats)
        result = run_checks(checks, root)
        assert all(c.passed for c in result.criteria), result.criteria
        print(f"checks: {files} files ({files // 10} markdown, the rest JSON), 4 checks")
        report("checks", ours, base)


def bench_command(repeats: int) -> None:
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    with tempfile.TemporaryDirectory() as tmp:
        grader = CommandGrader(id="t", argv=("true",))
        ours = median_seconds(lambda: run_command_grader(grader, Path(tmp), env=env), repeats)
        base = median_seconds(
            lambda: subprocess.run(["true"], cwd=tmp, env=env, check=True), repeats
        )
    print("command: `true`")
    report("command", ours, base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    bench_scorecard(args.repeats)
    bench_checks(args.files, args.repeats)
    bench_command(args.repeats * 3)


if __name__ == "__main__":
    main()
