"""Runs the `run:` steps of an action or a workflow job the way the Actions runner does.

For tests: each step's script is written to a file and run with
`bash --noprofile --norc -eo pipefail FILE` (the runner's `shell: bash`), with
the environment the step declares and the runner's files — a fresh
`GITHUB_OUTPUT` per step (read back into `steps.ID.outputs`), one
`GITHUB_STEP_SUMMARY`, `GITHUB_PATH` (its lines put before `PATH` for later
steps), `GITHUB_EVENT_PATH` with the payload.

`${{ }}` is evaluated only where the runner evaluates it for a script (`env:`
values, input defaults, `if:`) and only in the forms these files use: a
context path (`inputs.X`, `steps.ID.outputs.X`, `steps.ID.outcome`,
`needs.JOB.outputs.X`, `matrix.X`, `strategy.job-index`, `github.X`,
`github.event.X.Y`, `secrets.X`, `runner.X`), and for `if:` `always()`,
`!cancelled()`, `==`, `!=` and `&&`. Anything else
fails the test rather than being guessed. `uses:` steps (other actions, pinned
by SHA) are not run: the test says what each stands for (`uses=`), or it is
recorded as skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*")
_COMPARE = re.compile(rf"({_PATH.pattern})\s*(==|!=)\s*'([^']*)'")


@dataclass
class StepRun:
    id: str | None
    name: str
    returncode: int | None  # None: not run here (skipped by `if:`, or a `uses:` step)
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)
    outcome: str = "success"
    env: dict[str, str] = field(default_factory=dict)  # what a `run:` step ran with


@dataclass
class ActionsRunner:
    """One job's runner: its folders, the contexts, and the steps run so far."""

    workspace: Path
    temp: Path
    event_name: str
    event: Mapping[str, Any]
    github: dict[str, str] = field(default_factory=dict)  # github.X context values
    base_env: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    needs: dict[str, dict[str, Any]] = field(default_factory=dict)
    matrix: dict[str, str] = field(default_factory=dict)  # a matrix job's entry
    strategy: dict[str, str] = field(default_factory=dict)  # its `job-index`
    steps: list[StepRun] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.temp.mkdir(parents=True, exist_ok=True)
        self.summary = self.temp / "step_summary.md"
        self.summary.touch()
        self.path_file = self.temp / "github_path"
        self.path_file.touch()
        self.event_path = self.temp / "event.json"
        self.event_path.write_text(json.dumps(self.event), encoding="utf-8")

    # -------------------------------------------------------------- expressions

    def contexts(self, inputs: Mapping[str, str]) -> dict[str, Any]:
        steps = {s.id: {"outputs": s.outputs, "outcome": s.outcome} for s in self.steps if s.id}
        return {
            "inputs": inputs,
            "steps": steps,
            "needs": self.needs,
            "matrix": self.matrix,
            "strategy": self.strategy,
            "secrets": self.secrets,
            "runner": {"temp": str(self.temp)},
            "github": {**self.github, "event_name": self.event_name, "event": self.event},
        }

    def value(self, expr: str, inputs: Mapping[str, str]) -> str:
        if not _PATH.fullmatch(expr):
            raise AssertionError(f"the test runner does not evaluate ${{{{ {expr} }}}}")
        head, *rest = expr.split(".")
        found: Any = self.contexts(inputs)[head]
        for key in rest:  # an absent key is '' (a missing secret, an unset output)
            found = found.get(key, "") if isinstance(found, Mapping) else ""
        return found if isinstance(found, str) else json.dumps(found) if found else ""

    def evaluate(self, text: str, inputs: Mapping[str, str]) -> str:
        return _EXPR.sub(lambda m: self.value(m.group(1), inputs), text)

    def condition(self, text: str, inputs: Mapping[str, str]) -> bool:
        """An `if:`: terms joined by `&&`, each `always()`, `!cancelled()` (nothing here is
        ever cancelled) or `PATH ==/!= 'literal'`."""
        inner = _EXPR.fullmatch(text.strip())
        expression = inner.group(1) if inner else text
        result = True
        for term in (t.strip() for t in expression.split("&&")):
            if term in ("always()", "!cancelled()"):
                continue
            match = _COMPARE.fullmatch(term)
            if match is None:
                raise AssertionError(f"the test runner does not evaluate `if: {text}`")
            equal = self.value(match.group(1), inputs) == match.group(3)
            result = result and (equal if match.group(2) == "==" else not equal)
        return result

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
        for name in (
            "repository",
            "sha",
            "api_url",
            "action_path",
            "server_url",
            "workflow_ref",
            "base_ref",
        ):
            if name in self.github:
                env[f"GITHUB_{name.upper()}"] = self.github[name]
        return env

    def run_step(
        self,
        step: Mapping[str, Any],
        inputs: Mapping[str, str],
        *,
        uses: Mapping[str, Callable[[Mapping[str, Any]], None]] | None = None,
        provided: frozenset[str] = frozenset(),
    ) -> StepRun:
        """One step; `uses` maps an action (`owner/name`) to what the test does in its
        place; `provided` names `run:` steps whose effect the test machine already has."""
        name = str(step.get("name") or step.get("uses") or step.get("id"))
        if "if" in step and not self.condition(str(step["if"]), inputs):
            return self._record(StepRun(step.get("id"), name, None, outcome="skipped"))
        if "uses" in step:
            action = str(step["uses"]).split("@", 1)[0]
            if uses and action in uses:
                uses[action](step)
            return self._record(StepRun(step.get("id"), name, None))
        if name in provided:
            return self._record(StepRun(step.get("id"), name, None))
        assert step.get("shell") in ("bash", None), step
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
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_file)],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        return self._record(
            StepRun(
                step.get("id"),
                name,
                done.returncode,
                done.stdout,
                done.stderr,
                parse_outputs(output.read_text(encoding="utf-8")),
                "success" if done.returncode == 0 else "failure",
                env,
            )
        )

    def _record(self, done: StepRun) -> StepRun:
        self.steps.append(done)
        return done

    def _run_steps(
        self, steps: list[Mapping[str, Any]], inputs: Mapping[str, str], **kw: Any
    ) -> None:
        """In order; after a failure only steps whose `if:` says `always()` still run."""
        failed = False
        for step in steps:
            if failed and "always()" not in str(step.get("if", "")):
                self._record(
                    StepRun(step.get("id"), str(step.get("name")), None, outcome="skipped")
                )
                continue
            done = self.run_step(step, inputs, **kw)
            failed = failed or (done.outcome == "failure" and not step.get("continue-on-error"))

    def run_action(self, action_file: Path, given: Mapping[str, str], **kw: Any) -> dict[str, str]:
        """Every step of a composite action (`uses`, `provided`: as `run_step`); its outputs."""
        action = yaml.safe_load(action_file.read_text(encoding="utf-8"))
        assert action["runs"]["using"] == "composite"
        unknown = set(given) - set(action["inputs"])
        assert not unknown, f"not inputs of the action: {unknown}"
        inputs = {
            name: given.get(name, self.evaluate(str(spec.get("default", "")), {}))
            for name, spec in action["inputs"].items()
        }
        self._run_steps(action["runs"]["steps"], inputs, **kw)
        return {
            name: self.evaluate(str(spec["value"]), inputs)
            for name, spec in action["outputs"].items()
        }

    def run_job(self, job: Mapping[str, Any], **kw: Any) -> dict[str, str] | None:
        """A workflow job's steps (None when its `if:` skips it); the job's outputs."""
        if "if" in job and not self.condition(str(job["if"]), {}):
            return None
        self._run_steps(job["steps"], {}, **kw)
        return {name: self.evaluate(str(v), {}) for name, v in (job.get("outputs") or {}).items()}

    def failed(self) -> list[StepRun]:
        return [s for s in self.steps if s.outcome == "failure"]

    def log(self) -> str:
        return "\n".join(
            f"--- {s.name}: {s.outcome} {s.returncode}\n{s.stdout}\n{s.stderr}" for s in self.steps
        )


class ArtifactStore:
    """Plays upload-artifact and download-artifact (`pattern:`) between jobs: a folder per
    artifact name. `inputs`: an action's, for the expressions in its `with:`."""

    def __init__(self, store: Path, inputs: Mapping[str, str] | None = None) -> None:
        self.store = store
        self.inputs = inputs or {}
        self.runner: ActionsRunner | None = None  # the job now running

    def _with(self, step: Mapping[str, Any], name: str) -> str:
        assert self.runner is not None
        return self.runner.evaluate(str(step["with"][name]), self.inputs)

    def upload(self, step: Mapping[str, Any]) -> None:
        """As actions/upload-artifact: a process with the step's environment (the job's and
        the calling step's `env:`, which a composite action's steps inherit, plus the
        runtime token every JS action holds) reads the path FOLLOWING links, as its
        @actions/glob (`followSymbolicLinks: true`, broken links omitted) and its zip
        (`createReadStream`) do. So a link in the run folder uploads its target's content,
        read by that process (`/proc/self/environ`: its environment). A pipe or socket is
        a failure here: the real upload would hang on a pipe."""
        assert self.runner is not None
        name = self._with(step, "name")
        assert "/" not in name and "${{" not in name, name
        source = self.runner.workspace / self._with(step, "path")
        if not os.path.lexists(source):
            assert step["with"].get("if-no-files-found") == "ignore", f"{name}: no {source}"
            return
        env = self.runner.runner_env(self.runner.temp / "upload-output")
        env["ACTIONS_RUNTIME_TOKEN"] = UPLOAD_RUNTIME_TOKEN
        subprocess.run(
            [sys.executable, "-c", _UPLOAD, str(source), str(self.store / name)],
            env=env, check=True, timeout=120,
        )  # fmt: skip

    def download(self, step: Mapping[str, Any]) -> None:
        """`name:`: that artifact's files in `path` (none by that name fails the step)."""
        assert self.runner is not None
        assert set(step["with"]) == {"name", "path"}, step["with"]
        source = self.store / self._with(step, "name")
        assert source.is_dir(), f"no artifact {source.name}"
        target = self.runner.workspace / self._with(step, "path")
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)

    def download_pattern(self, step: Mapping[str, Any]) -> None:
        """`pattern:` without `merge-multiple`: each matching artifact in `path/<name>/`."""
        assert self.runner is not None
        assert set(step["with"]) == {"pattern", "path"}, step["with"]
        prefix = self._with(step, "pattern").removesuffix("*")
        target = self.runner.workspace / self._with(step, "path")  # a relative path: in it
        for source in sorted(self.store.glob(f"{prefix}*")):
            shutil.copytree(source, target / source.name, symlinks=True)


UPLOAD_RUNTIME_TOKEN = "actions-runtime-token-0000000000000000000000"  # a JS action's own

# The upload, run as its own process: every path followed (links included) and read.
_UPLOAD = r"""
import os, shutil, stat, sys
source, dest = sys.argv[1], sys.argv[2]
def put(path, rel, seen=frozenset()):
    try:
        mode = os.stat(path).st_mode  # followed, as @actions/glob does
    except OSError:
        return  # a broken link: omitted (omitBrokenSymbolicLinks)
    if stat.S_ISDIR(mode):
        real = os.path.realpath(path)
        if real in seen:
            return  # a cycle of links: @actions/glob skips it too
        for name in sorted(os.listdir(path)):
            put(os.path.join(path, name), os.path.join(rel, name), seen | {real})
    elif stat.S_ISREG(mode):
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(path, "rb") as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)
    else:
        sys.exit(f"upload-artifact would hang or fail on {path}: not a file nor a folder")
if os.path.isdir(source):
    os.makedirs(dest, exist_ok=True)
    for name in sorted(os.listdir(source)):
        put(os.path.join(source, name), name)
else:
    put(source, os.path.basename(source))
"""


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


def runner_python(tmp_path: Path) -> Path:
    """The `bin` folder of a fresh interpreter whose `python` also sees this test
    environment's packages (a .pth file): a workflow's `pip install` then
    installs ci-evals itself without downloading its dependencies again, and
    without touching the test's own environment."""
    venv = tmp_path / "runner-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path(purelib, "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def runner_env(bin_dir: Path) -> dict[str, str]:
    """This process's environment as a runner's: no GITHUB_*, no proxy, `bin_dir` first."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "VIRTUAL_ENV")) and k.lower() not in _PROXIES
    }
    env["PATH"] = os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"])
    return env


_PROXIES = ("http_proxy", "https_proxy", "all_proxy")
