"""Runs the `run:` steps of an action or workflow job the way the Actions runner does.

For tests: each step's script is written to a file and run with
`bash --noprofile --norc -eo pipefail FILE` (the runner's `shell: bash`), with
the environment the step declares and the runner's files — a fresh
`GITHUB_OUTPUT` per step (read back into `steps.ID.outputs`), one
`GITHUB_STEP_SUMMARY`, `GITHUB_PATH` (its lines put before `PATH` for later
steps), `GITHUB_EVENT_PATH` with the payload. `${{ }}` expressions are
evaluated only where the runner evaluates them for a script (`env:` values,
input defaults) and only in the forms the files use: `inputs.X`,
`steps.ID.outputs.X`, `github.X`; anything else fails the test rather than
being guessed. `uses:` steps (other actions) are listed as skipped: what they
do is theirs, and they are pinned by SHA.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_NAME = r"[A-Za-z_][A-Za-z0-9_-]*"


@dataclass
class StepRun:
    id: str | None
    name: str
    returncode: int | None  # None: skipped (a `uses:` step)
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionsRunner:
    """One job's runner state: its folders, context values and the steps run so far."""

    workspace: Path
    temp: Path
    event_name: str
    event: Mapping[str, Any]
    github: dict[str, str] = field(default_factory=dict)  # github.X context values
    base_env: dict[str, str] = field(default_factory=dict)
    steps: list[StepRun] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.temp.mkdir(parents=True, exist_ok=True)
        self.summary = self.temp / "step_summary.md"
        self.summary.touch()
        self.path_file = self.temp / "github_path"
        self.path_file.touch()
        self.event_path = self.temp / "event.json"
        import json  # noqa: PLC0415

        self.event_path.write_text(json.dumps(self.event), encoding="utf-8")

    # -------------------------------------------------------------- expressions

    def evaluate(self, text: str, inputs: Mapping[str, str]) -> str:
        return _EXPR.sub(lambda m: self._value(m.group(1), inputs), text)

    def _value(self, expr: str, inputs: Mapping[str, str]) -> str:
        if m := re.fullmatch(rf"inputs\.({_NAME})", expr):
            return inputs[m.group(1)]
        if m := re.fullmatch(rf"steps\.({_NAME})\.outputs\.({_NAME})", expr):
            done = [s for s in self.steps if s.id == m.group(1)]
            return done[-1].outputs.get(m.group(2), "") if done else ""
        if m := re.fullmatch(rf"github\.({_NAME})", expr):
            return self.github[m.group(1)]
        raise AssertionError(f"the test runner does not evaluate ${{{{ {expr} }}}}")

    # -------------------------------------------------------------- steps

    def runner_env(self, output: Path) -> dict[str, str]:
        env = {k: v for k, v in self.base_env.items() if not k.startswith("GITHUB_")}
        extra_path = [p for p in self.path_file.read_text().splitlines() if p]
        env["PATH"] = os.pathsep.join([*reversed(extra_path), env.get("PATH", "")])
        env |= {
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_PATH": str(self.path_file),
            "GITHUB_EVENT_NAME": self.event_name,
            "GITHUB_EVENT_PATH": str(self.event_path),
            "GITHUB_WORKSPACE": str(self.workspace),
            "RUNNER_TEMP": str(self.temp),
        }
        for name in ("repository", "sha", "api_url", "action_path"):
            if name in self.github:
                env[f"GITHUB_{name.upper()}"] = self.github[name]
        return env

    def run_step(self, step: Mapping[str, Any], inputs: Mapping[str, str]) -> StepRun:
        name = str(step.get("name") or step.get("uses") or step.get("id"))
        if "uses" in step:
            done = StepRun(step.get("id"), name, None)
            self.steps.append(done)
            return done
        assert step.get("shell") in ("bash", None), step
        assert "if" not in step, f"{name}: the test runner does not evaluate `if:`"
        script = str(step["run"])
        assert "${{" not in script, f"{name}: an expression inside run: (use env:)"
        index = len(self.steps)
        output = self.temp / f"output-{index}"
        output.touch()
        script_file = self.temp / f"step-{index}.sh"
        script_file.write_text(script, encoding="utf-8")
        env = self.runner_env(output)
        for key, value in (step.get("env") or {}).items():
            env[str(key)] = self.evaluate(str(value), inputs)
        done_process = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_file)],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        done = StepRun(
            step.get("id"),
            name,
            done_process.returncode,
            done_process.stdout,
            done_process.stderr,
            parse_outputs(output.read_text(encoding="utf-8")),
        )
        self.steps.append(done)
        return done

    def run_action(self, action_file: Path, given: Mapping[str, str]) -> dict[str, str]:
        """Every step of a composite action in order, stopping at the first failure
        (as the runner does for steps without `if: always()`); the action's outputs."""
        action = yaml.safe_load(action_file.read_text(encoding="utf-8"))
        assert action["runs"]["using"] == "composite"
        unknown = set(given) - set(action["inputs"])
        assert not unknown, f"not inputs of the action: {unknown}"
        inputs = {
            name: given.get(name, self.evaluate(str(spec.get("default", "")), {}))
            for name, spec in action["inputs"].items()
        }
        for step in action["runs"]["steps"]:
            done = self.run_step(step, inputs)
            if done.returncode not in (0, None):
                break
        return {
            name: self.evaluate(str(spec["value"]), inputs)
            for name, spec in action["outputs"].items()
        }


def parse_outputs(text: str) -> dict[str, str]:
    """`$GITHUB_OUTPUT` as the runner reads it: `name=value` and `name<<DELIM` blocks."""
    outputs: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value: list[str] = []
            for inner in lines:
                if inner == delimiter:
                    break
                value.append(inner)
            else:
                raise AssertionError(f"unterminated {name}<<{delimiter}")
            outputs[name] = "\n".join(value)
        elif "=" in line:
            name, value_text = line.split("=", 1)
            outputs[name] = value_text
        elif line:
            raise AssertionError(f"not an output line: {line!r}")
    return outputs
