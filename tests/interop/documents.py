"""`claude plugin eval` documents (aggregate-result.json, schemaVersion 1) built in the
shape the bundled CLI writes them (its keys, its scoring), for the import tests.

`run()` scores its graders as the CLI does (the weighted share of scored graders
passed, 0 when none; `passed` is score >= 1) and `case()` its runs (the mean), so
a document built here agrees with itself unless a test edits it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Json = dict[str, Any]


def grader(name: str, passed: bool, weight: float = 1, *, with_only: bool = False) -> Json:
    return {
        "name": name,
        "passed": passed,
        "weight": weight,
        "explanation": f"{name} {'matched' if passed else 'did not match'}",
        "withOnly": with_only,
        "scored": not with_only,
    }


def run(*graders: Json, error: str | None = None, skipped_paid: bool = False, **kw: Any) -> Json:
    scored = [g for g in graders if g["scored"]]
    total = sum(g["weight"] for g in scored)
    score = sum(g["weight"] for g in scored if g["passed"]) / total if total else 0
    return {
        "score": score,
        "passed": score >= 1,
        "turns": kw.pop("turns", 2),
        "costUsd": kw.pop("costUsd", 0.25),
        "judgeCostUsd": kw.pop("judgeCostUsd", 0.05),
        "durationSeconds": 3,
        "startedAt": "2026-11-30T10:00:01.000Z",
        "error": error,
        "tracePath": kw.pop("tracePath", "/tmp/claude-eval-AbCdEf/out/trace.jsonl"),
        "skippedPaidGraders": skipped_paid,
        "graders": list(graders),
        **kw,
    }


def case(name: str, runs: list[Json], without: list[Json] | None = None, **kw: Any) -> Json:
    score = sum(r["score"] for r in runs) / len(runs) if runs else 0
    aggregates: Json = {"score": score, "passRate": _rate(runs)}
    arms: Json = {"with": runs}
    if without is not None:
        arms["without"] = without
        without_score = sum(r["score"] for r in without) / len(without) if without else 0
        aggregates |= {
            "scoreWithout": without_score,
            "passRateWithout": _rate(without),
            "delta": score - without_score,
        }
    names = {g["name"]: g["weight"] for r in [*runs, *(without or [])] for g in r["graders"]}
    return {
        "name": name,
        "dir": f"evals/{name}",
        "source": "prose",
        "promptMarkdown": f"Do {name}.",
        "runsPerCase": kw.pop("runsPerCase", len(runs)),
        "timeoutSeconds": 300,
        "maxTurns": 10,
        "graders": [
            {"name": n, "type": "regex", "weight": w, "config": {"pattern": "x"}}
            for n, w in names.items()
        ],
        "arms": arms,
        "aggregates": aggregates,
        **kw,
    }


def document(*cases: Json, ablation: str = "none", threshold: float = 1, **kw: Any) -> Json:
    return {
        "schemaVersion": 1,
        "claudeVersion": "2.1.337",
        "startedAt": "2026-11-30T10:00:00.000Z",
        "durationSeconds": 42,
        "costUsd": kw.pop("costUsd", 1.5),
        "partial": kw.pop("partial", False),
        **kw,
        "suite": {
            "root": "/home/runner/work/greeter/greeter",
            "ablation": ablation,
            "threshold": threshold,
            "concurrency": 1,
            "plugins": [{"name": "greeter", "version": "0.1.0", "path": "/home/runner/greeter"}],
        },
        "cases": list(cases),
        "aggregates": {
            "casesTotal": len(cases),
            "casesPassed": sum(1 for c in cases if c["aggregates"]["score"] >= threshold),
            "overallScore": _mean([c["aggregates"]["score"] for c in cases]),
            "overallPassRate": _mean([c["aggregates"]["passRate"] for c in cases]),
        },
    }


def write(path: Path, value: Json) -> Path:
    path.write_text(json.dumps(value, indent=2))
    return path


def _rate(runs: list[Json]) -> float:
    return sum(1 for r in runs if r["score"] >= 1) / len(runs) if runs else 0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0
