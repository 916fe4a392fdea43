"""`ci-evals report RUN --html DIR` on a run whose stage has a huge trajectory.

The issue's target: a 100 MB trajectory still gives its site in under 2 s and
50 MB of memory (the timeline stops parsing once a page holds enough, and
counts the rest). Each measurement is a fresh process (peak RSS from
`getrusage`), against two baselines on the same machine: the interpreter
importing what `report` imports and reading `results.json` (`floor`), and
`json.loads` of every line of the trajectory (`parse-all`, what a reader that
parsed the whole file would pay at least).

    .venv/bin/python benchmarks/bench_report_html.py [--mb 100] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ci_evals.results.model import (
    FileChange,
    RunResult,
    ScenarioResult,
    StageResult,
    write_results,
)

LINE = {
    "type": "AssistantMessage",
    "model": "claude-sonnet-4-5",
    "parent_tool_use_id": None,
    "content": [{"text": "x" * 2000}, {"id": "t", "name": "Bash", "input": {"command": "ls"}}],
    "usage": {"input_tokens": 1000, "output_tokens": 200},
}


def make_run(top: Path, megabytes: int) -> Path:
    run = top / "run"
    folder = run / "acme" / "1-build"
    (folder / "after").mkdir(parents=True)
    (folder / "after" / "out.md").write_text("# out\n" * 1000)
    line = (json.dumps(LINE) + "\n").encode()
    with (folder / "trajectory.jsonl").open("wb") as out:
        for _ in range(megabytes * (1 << 20) // len(line)):
            out.write(line)
    stage = StageResult(
        number=1,
        name="build",
        status="completed",
        graded=False,
        trajectory="acme/1-build/trajectory.jsonl",
        produced_dir="acme/1-build/produced",
        produced=[FileChange(path="out.md", change="added", sha256="0" * 64, size=6000)],
    )
    result = RunResult(
        run_id="bench",
        tool_version="0",
        started_at="2026-01-01T00:00:00Z",  # type: ignore[arg-type]
        finished_at="2026-01-01T00:01:00Z",  # type: ignore[arg-type]
        status="completed",
        from_stage=1,
        suite_file="ci-evals.yaml",
        scenarios=[ScenarioResult(id="acme", stages=[stage])],
    )
    write_results(run, result)
    return run


PEAK = "\nimport resource\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"


def measure(code: str, repeats: int) -> tuple[float, float]:
    """(median seconds, max peak RSS in MiB) of a fresh `python -c code`."""
    times, peaks = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code + PEAK], check=True, capture_output=True, text=True
        )
        times.append(time.perf_counter() - start)
        peaks.append(int(done.stdout.split()[-1]) / 1024)
    return statistics.median(times), max(peaks)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp), args.mb)
        site = Path(tmp) / "site"
        trajectory = run / "acme" / "1-build" / "trajectory.jsonl"
        floor = (
            "from pathlib import Path; from ci_evals.results.model import read_results\n"
            "from ci_evals.report.html import write_site\n"
            f"read_results(Path({str(run)!r}))"
        )
        parse_all = f"import json\nfor l in open({str(trajectory)!r}, 'rb'): json.loads(l)"
        ours = (
            "from ci_evals.main import main\n"
            f"main(['report', {str(run)!r}, '--html', {str(site)!r}, "
            f"'--markdown', {str(Path(tmp) / 's.md')!r}])"
        )
        size = trajectory.stat().st_size / (1 << 20)
        print(f"a {size:.0f} MiB trajectory, {args.repeats} runs each (peak RSS is the max)")
        codes = {"floor": floor, "parse-all": parse_all, "report --html": ours}
        results = {name: measure(code, args.repeats) for name, code in codes.items()}
        base = results["floor"][0]
        for name, (seconds, peak) in results.items():
            ratio = seconds / base
            print(f"{name:<14} {seconds:7.3f} s  x{ratio:5.2f} floor   peak {peak:6.1f} MiB")


if __name__ == "__main__":
    main()
