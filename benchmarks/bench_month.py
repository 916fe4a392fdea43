"""A simulated month of pull requests against the example: what issue 36's rules save.

Copies the labsmith example (suite, stage map, plugin, fixtures) into a fresh
git repository and commits a seeded month of pull requests with the mix a
plugin's repository shows: edits to a command, skill or planner agent (the
agent's files), to a rubric (a grader's, but `commands/generate-chapter.md`
tells the agent where its rubrics are: fail closed, it runs), to a reviewer
agent's body (a grader's, but `commands/plan-lab.md` names that reviewer:
fail closed, it runs), to the suite's scoring threshold (a grader key), to the README.
For each, in process, what `run --base` decides (`selection.diff.compute`,
then `selection.grader_change.decide`): a re-grade of main's saved run, or a
run from stage k.

Prices are measured, not guessed: one real run of the example on the stub
model (every stage, both scenarios; per-stage wall time and the stub's
simulated cost) and one real `ci-evals grade` of that run (the re-grade's
time and cost). A re-run from stage k costs the measured stages k..5; a
re-grade costs the measured re-grade.

Adaptive repeats: for each pull request's runs with `repeat: K` (default 5,
all must pass) each scenario's stage outcome is drawn from a seeded pass
rate (a stable pass, a broken change, a flaky stage), and
`run.adaptive.decided` — the runner's own rule — counts how many repeats
start. Simulated outcomes: the rule is exact, so this counts runs, not money.

Forecast: for the first `--actual N` pull requests that run the agent, the
forecast `ci-evals forecast` would print (`report.forecast.forecast`, priced
from the history the action would hold: main's run and the runs measured
since, most recent first, at most 5) against a real run of that pull request
on the stub model from its stage: the relative error of the cost and of the
stages' time, per pull request and on average. The stub's cost is its
token counts at list prices: deterministic, so the cost error says whether
the pricing rule is right, not how a real model's spread behaves; the time
error is the machine's own variance.

    .venv/bin/python benchmarks/bench_month.py [--prs 40] [--seed 7] [--repeat 5] [--actual 10]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ci_evals.report.forecast import Planned, forecast
from ci_evals.results.model import RunResult, read_results
from ci_evals.run.adaptive import decided
from ci_evals.selection import diff as diff_range
from ci_evals.selection.grader_change import decide
from ci_evals.selection.stage_map import load_stage_map

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}
PLUGIN = "examples/labsmith/plugin"
STUB = "examples/labsmith/stub/labsmith.yaml"
# Kinds of pull request, with how often each comes (weights), and the file each edits.
KINDS = {
    "command": (30, f"{PLUGIN}/commands/plan-chapter.md"),
    "skill": (15, f"{PLUGIN}/skills/write-chapter/SKILL.md"),
    "planner": (10, f"{PLUGIN}/agents/lab-planner.md"),
    "rubric": (20, f"{PLUGIN}/references/evaluation/checklist/generate-chapter"),
    "reviewer-body": (5, f"{PLUGIN}/agents/review-generated.md"),
    "threshold": (10, "ci-evals.yaml"),
    "readme": (10, "examples/labsmith/README.md"),
}
# Pass rates of a stage's repeats after a change: most pass, some are broken, a few flaky.
OUTCOMES = {1.0: 70, 0.0: 20, 0.7: 10}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env={**ENV, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def make_repo(repo: Path) -> None:
    """The example as a user's repository holds it: suite, map, plugin, fixtures."""
    for name in ("ci-evals.yaml", "stage_map.yaml"):
        shutil.copy2(ROOT / name, repo / name)
    for folder in ("examples/labsmith", "fixtures"):
        shutil.copytree(ROOT / folder, repo / folder)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "the example")


def _edit(repo: Path, kind: str, path: str, n: int) -> None:
    target = repo / path
    if kind == "rubric":  # a line more in one rubric file of the folder
        target = sorted(p for p in target.rglob("*") if p.is_file())[0]
    if kind == "threshold":
        text = target.read_text()
        value = "3.0" if "analytic_mean_at_least: 3.5" in text else "3.5"
        target.write_text(
            text.replace("analytic_mean_at_least: 3.0", f"analytic_mean_at_least: {value}").replace(
                "analytic_mean_at_least: 3.5", f"analytic_mean_at_least: {value}"
            )
        )
        return
    with target.open("a") as out:
        out.write(f"\nEdit {n}.\n")


def month(repo: Path, prs: int, rng: random.Random) -> list[tuple[str, int | None, bool]]:
    """Per pull request: its kind, the stage `run --base` starts at, and whether it re-grades."""
    stage_map = load_stage_map(repo / "stage_map.yaml", cache=False)
    kinds = list(KINDS)
    weights = [KINDS[k][0] for k in kinds]
    answers = []
    for n in range(prs):
        kind = rng.choices(kinds, weights)[0]
        _git(repo, "checkout", "-q", "-b", f"pr-{n}", "main")
        _edit(repo, kind, KINDS[kind][1], n)
        _git(repo, "commit", "-q", "-am", f"pr {n}: {kind}")
        chosen = diff_range.compute(repo, stage_map, "main")
        verdict = decide(repo, chosen, stage_map)
        answers.append((kind, chosen.from_stage, verdict.regrade))
        _git(repo, "checkout", "-q", "main")
    return answers


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", *args], cwd=cwd, capture_output=True, text=True,
        check=False,
    )  # fmt: skip


def measure(repo: Path, work: Path) -> tuple[dict[int, tuple[float, float]], float, float]:
    """One real run on the stub (per stage: seconds, simulated $ summed over scenarios)
    and one real re-grade of it (seconds, $)."""
    run_dir = work / "main-run"
    done = _cli("run", "--model", f"stub:{STUB}", "--out", str(run_dir), cwd=repo)
    if not (run_dir / "results.json").is_file():
        raise SystemExit(f"the example's run failed: {done.stderr[-2000:]}")
    results = json.loads((run_dir / "results.json").read_text())
    stages: dict[int, tuple[float, float]] = {}
    for scenario in results["scenarios"]:
        for stage in scenario["stages"]:
            secs, cost = stages.get(stage["number"], (0.0, 0.0))
            stages[stage["number"]] = (
                secs + (stage.get("duration_s") or 0.0),
                cost + (stage.get("cost_usd") or 0.0) + (stage.get("grading_cost_usd") or 0.0),
            )
    start = time.perf_counter()
    out = work / "regraded.json"
    _cli("grade", str(run_dir), "--model", f"stub:{STUB}", "--output", str(out), cwd=repo)
    seconds = time.perf_counter() - start
    if not out.is_file():
        raise SystemExit("the re-grade wrote nothing")
    regraded = json.loads(out.read_text())
    cost = sum(
        s.get("grading_cost_usd") or 0.0 for sc in regraded["scenarios"] for s in sc["stages"]
    )
    return stages, seconds, cost


def repeats(
    answers: list[tuple[str, int | None, bool]], k: int, rng: random.Random
) -> tuple[int, int]:
    """(repeats started under the early-stopping rule, repeats without it) over the month."""
    rates, weights = list(OUTCOMES), list(OUTCOMES.values())
    started = full = 0
    for _, stage, regrade in answers:
        if stage is None or regrade:
            continue
        for _scenario in range(2):
            rate = rng.choices(rates, weights)[0]
            outcomes = ["passed" if rng.random() < rate else "failed" for _ in range(k)]
            ran = next(n for n in range(1, k + 1) if n == k or decided(outcomes[:n], k, None))
            started += ran
            full += k
    return started, full


HISTORY = 5  # the runs a forecast prices from, most recent first


def _stage_seconds(result: RunResult) -> float:
    return sum(s.duration_s or 0.0 for sc in result.scenarios for s in sc.stages)


def forecast_errors(
    repo: Path, work: Path, answers: list[tuple[str, int | None, bool]], actual: int
) -> list[tuple[int, str, float, float, float, float]]:
    """For the first `actual` pull requests that run the agent: (PR, kind, forecast $,
    actual $, forecast stage-seconds, actual stage-seconds). Each priced from the
    history before it, then run for real (the stub) and added to that history."""
    history = [read_results(work / "main-run")]
    main = history[0]
    names = {s.number: s.name for s in main.scenarios[0].stages}
    scenarios = [s.id for s in main.scenarios if s.arm == "with"]
    rows = []
    for n, (kind, stage, regrade) in enumerate(answers):
        if stage is None or regrade or len(rows) >= actual:
            continue
        planned = [
            Planned(scenario, number, names[number], runs=1)
            for scenario in scenarios
            for number in sorted(names)
            if number >= stage
        ]
        priced = forecast(planned, history, stages_total=len(names), scenarios_total=len(scenarios))
        _git(repo, "checkout", "-q", f"pr-{n}")
        out = work / f"pr-{n}"
        done = _cli(
            "run", "--model", f"stub:{STUB}", "--from-stage", str(stage), "--out", str(out),
            cwd=repo,
        )  # fmt: skip
        _git(repo, "checkout", "-q", "main")
        if not (out / "results.json").is_file():
            raise SystemExit(f"pull request {n}'s run failed: {done.stderr[-2000:]}")
        ran = read_results(out)
        rows.append((n, kind, priced.cost, ran.total_cost_usd, priced.seconds, _stage_seconds(ran)))
        history = [ran, *history][:HISTORY]
    return rows


def _relative(forecast_value: float, actual_value: float) -> float:
    return abs(forecast_value - actual_value) / actual_value if actual_value else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--prs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--actual", type=int, default=10, help="pull requests run for real to score the forecast"
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-month-") as temp:
        work = Path(temp)
        repo = work / "repo"
        repo.mkdir()
        make_repo(repo)
        stages, regrade_s, regrade_usd = measure(repo, work)
        answers = month(repo, args.prs, rng)
        errors = forecast_errors(repo, work, answers, args.actual)
    rerun_s = rerun_usd = chosen_s = chosen_usd = 0.0
    regrades = runs = 0
    for kind, stage, regrade in answers:
        if stage is None:
            continue
        cost_s = sum(s for n, (s, _) in stages.items() if n >= stage)
        cost_usd = sum(c for n, (_, c) in stages.items() if n >= stage)
        rerun_s += cost_s
        rerun_usd += cost_usd
        if regrade:
            regrades += 1
            chosen_s += regrade_s
            chosen_usd += regrade_usd
        else:
            runs += 1
            chosen_s += cost_s
            chosen_usd += cost_usd
        print(f"  {kind:14} from stage {stage}  {'re-grade' if regrade else 'run'}")
    full_s = sum(s for s, _ in stages.values())
    full_usd = sum(c for _, c in stages.values())
    print(f"\nmeasured: full run {full_s:.1f} s ${full_usd:.4f} (stub prices); "
          f"re-grade {regrade_s:.1f} s ${regrade_usd:.4f}")  # fmt: skip
    print(f"{len(answers)} PRs: {regrades} re-graded, {runs} ran, "
          f"{len(answers) - regrades - runs} had nothing to run")  # fmt: skip
    if rerun_s:
        print(f"time: {chosen_s:.0f} s with re-grades vs {rerun_s:.0f} s re-running: "
              f"ratio {chosen_s / rerun_s:.3f}")  # fmt: skip
    if rerun_usd:
        print(f"cost: ${chosen_usd:.4f} vs ${rerun_usd:.4f}: ratio {chosen_usd / rerun_usd:.3f}")
    started, full = repeats(answers, args.repeat, rng)
    if full:
        print(f"repeats (K={args.repeat}, all must pass): {started} of {full} started, "
              f"{full - started} saved: ratio {started / full:.3f}")  # fmt: skip
    print(f"\nforecast vs actual ({len(errors)} PRs run for real, history <= {HISTORY} runs):")
    for n, kind, cost, spent, secs, took in errors:
        print(f"  PR {n:2} {kind:14} ${cost:.4f} vs ${spent:.4f}  "
              f"{secs:5.1f} s vs {took:5.1f} s")  # fmt: skip
    if errors:
        cost_err = [_relative(c, a) for _, _, c, a, _, _ in errors]
        time_err = [_relative(s, t) for _, _, _, _, s, t in errors]
        print(f"forecast error: cost mean {sum(cost_err) / len(cost_err):.1%} "
              f"(max {max(cost_err):.1%}); stage time mean "
              f"{sum(time_err) / len(time_err):.1%} (max {max(time_err):.1%})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
