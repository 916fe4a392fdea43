"""A backend shipped outside this repository: one package, its entry points, no edit here.

The package (written below into a temp folder, with its own pyproject.toml) adds
one kind to each seam: an agent kind (`scripted`: writes the files its block
names, through the sandbox), a sandbox kind (`audited`: the host's sandbox,
logging every call to a file its block names), a grader kind (the stage key
`words`: a file has at least N words) and an endpoint kind (`--model
silent:NAME`: no model at all, for an agent that asks none); the grader's
criteria name their kind as their source, through `run` and `report`. A fifth,
`broken`, raises where `--model broken:WHERE` says: its failure is the
package's, one line naming it, not a bug of ci-evals. It is
pip-installed into a fresh virtualenv that sees this checkout and its
dependencies (a `.pth` adding this interpreter's site-packages, so nothing is
downloaded), and a suite that names all four runs there end to end through
`python -m ci_evals run`. The same venv then shows the errors for a bad block
and an unknown kind, at their file:line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

# A fresh venv and a run per case: tens of seconds.
pytestmark = pytest.mark.slow

PACKAGE = "ci_evals_example_backends"

PYPROJECT = f"""\
[build-system]
requires = []
build-backend = "wheel_backend"
backend-path = ["."]

[project]
name = "ci-evals-example-backends"
version = "0.1"

[project.entry-points."ci_evals.agents"]
scripted = "{PACKAGE}:AGENT"

[project.entry-points."ci_evals.sandboxes"]
audited = "{PACKAGE}:SANDBOX"

[project.entry-points."ci_evals.graders"]
words = "{PACKAGE}:GRADER"

[project.entry-points."ci_evals.endpoints"]
silent = "{PACKAGE}:ENDPOINT"
broken = "{PACKAGE}:BROKEN"
# Named as a Bedrock model id's part before its colon, pointing at no module at
# all: `--model us.anthropic.claude-sonnet-v1:0` is a model id, never this kind.
"us.anthropic.claude-sonnet-v1" = "nobody_imports_this:KIND"
"""

# A PEP 517 backend of the package's own (`backend-path`), so that installing it
# needs no build tool the fresh venv may lack (setuptools, wheel) and nothing is
# downloaded: a wheel is a zip of the package and its metadata, entry points as
# pyproject.toml declares them.
WHEEL_BACKEND = f"""\
import base64, hashlib, tomllib, zipfile
from pathlib import Path

NAME, VERSION = "ci_evals_example_backends", "0.1"
INFO = f"{{NAME}}-{{VERSION}}.dist-info"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    groups = project["entry-points"]
    entry_points = "".join(
        f"[{{group}}]\\n" + "".join(f"{{k}} = {{v}}\\n" for k, v in names.items()) + "\\n"
        for group, names in groups.items()
    )
    files = {{
        f"{PACKAGE}/__init__.py": Path("{PACKAGE}/__init__.py").read_bytes(),
        f"{{INFO}}/METADATA": (
            f"Metadata-Version: 2.1\\nName: {{project['name']}}\\nVersion: {{VERSION}}\\n"
        ).encode(),
        f"{{INFO}}/WHEEL": (
            b"Wheel-Version: 1.0\\nGenerator: wheel_backend\\nRoot-Is-Purelib: true\\n"
            b"Tag: py3-none-any\\n"
        ),
        f"{{INFO}}/entry_points.txt": entry_points.encode(),
    }}
    record = "".join(
        f"{{name}},sha256={{base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()}},{{len(data)}}\\n"
        for name, data in files.items()
    ) + f"{{INFO}}/RECORD,,\\n"
    wheel = f"{{NAME}}-{{VERSION}}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / wheel, "w") as out:
        for name, data in files.items():
            out.writestr(name, data)
        out.writestr(f"{{INFO}}/RECORD", record)
    return wheel
"""

# What a third party writes: only ci_evals' public seams (the kinds' Protocols).
MODULE = '''\
"""A kind for each seam of ci-evals, from outside its repository."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path

from ci_evals.agents import StageOutcome
from ci_evals.endpoints.base import OpenEndpoint
from ci_evals.errors import UserError
from ci_evals.results.criteria import Criterion, GraderResult
from ci_evals.sandbox.base import SandboxOptions, SandboxSpec
from ci_evals.sandbox.local import KIND as HOST
from ci_evals.sandbox.registry import open_sandbox


class Scripted:
    """Writes `files: {NAME: TEXT}` into the stage's folder, through its sandbox."""

    name = "scripted"

    async def run_stage(self, request, *, abort, on_progress=None):
        files = request.options or {}
        request.trajectory_path.parent.mkdir(parents=True, exist_ok=True)
        request.trajectory_path.write_text("")
        request.stderr_path.write_text("")
        spec = SandboxSpec(writable=(request.cwd, *request.writable))
        with open_sandbox(request.sandbox, spec) as box:
            for name, text in files.items():
                box.put(request.cwd / name, text.encode())
        return StageOutcome(status="completed", turns=1)


class ScriptedKind:
    name = "scripted"
    needs_plugin = False

    def load(self, value):
        if value is None:
            return {}
        keys = value.mapping(("kind", "files"), required=("files",))
        files = keys["files"].plain()
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise keys["files"].error("expected a mapping of file names to text")
        return files

    def available(self):
        return None

    def with_variation(self, options, variation):
        raise UserError("agent scripted has nothing to vary")

    def create(self):
        return Scripted()


@dataclasses.dataclass(frozen=True)
class AuditedOptions(SandboxOptions):
    log: Path | None = None


class Audited:
    """The host's sandbox, each call appended to the log as one JSON line."""

    def __init__(self, inner, log):
        self.inner, self.log = inner, log
        self.name, self.isolated = "audited", False

    @property
    def over_quota(self):
        return self.inner.over_quota

    def _note(self, *what):
        with self.log.open("a") as out:
            out.write(json.dumps([str(part) for part in what]) + "\\n")

    def spawn(self, argv, *, cwd, env):
        self._note("spawn", *argv)
        return self.inner.spawn(argv, cwd=cwd, env=env)

    def exec(self, argv, **kwargs):
        self._note("exec", *argv)
        return self.inner.exec(argv, **kwargs)

    def put(self, path, data):
        self._note("put", path)
        self.inner.put(path, data)

    def get(self, path):
        self._note("get", path)
        return self.inner.get(path)

    def close(self):
        self.inner.close()


class AuditedKind:
    name = "audited"
    isolated = False
    falls_back_to_host = True
    runs_images = False

    def load(self, value, suite_dir):
        if value is None:
            hint = "sandbox: {kind: audited, log: FILE}"
            raise UserError("the audited sandbox needs a log", hint=hint)
        keys = value.mapping(("kind", "log"), required=("log",))
        return AuditedOptions(log=suite_dir / keys["log"].as_str())

    def available(self):
        return None

    def prepare(self, options, environ, run_id):
        return options

    def image_options(self, image):
        raise UserError("the audited sandbox runs no images")

    def limits(self):
        return HOST.limits()

    def open(self, spec, options):
        return Audited(HOST.open(spec, SandboxOptions()), options.log)


@dataclasses.dataclass(frozen=True)
class Words:
    """`file` holds at least `least` words: one checklist criterion."""

    id: str
    file: str
    least: int
    name = "words"
    writes = False
    sandboxed = False
    scoring = None

    def files_only(self):
        return self

    def grade(self, ctx):
        path = ctx.folder / self.file
        found = len(path.read_text().split()) if path.is_file() else 0
        passed = found >= self.least
        criterion = Criterion(
            id=self.id, kind="checklist", score=float(passed), passed=passed,
            source="words", detail=f"{self.file}: {found} word(s), at least {self.least}",
        )
        return GraderResult(grader=self.name, criteria=(criterion,))


class WordsKind:
    name = "words"

    def load(self, value, ctx):
        graders = []
        for item in value.sequence(allow_empty=False):
            keys = item.mapping(("id", "file", "min"), required=("id", "file", "min"))
            least = keys["min"].as_int(minimum=1)
            graders.append(Words(keys["id"].as_str(), keys["file"].as_str(), least))
        return tuple(graders)

    def available(self):
        return None


class Silent:
    def __init__(self, name):
        self.name = name

    def check(self, environ, why, hint=None):
        pass

    @contextlib.contextmanager
    def open(self, environ, options):
        yield OpenEndpoint(name=self.name, env={}, model=None)


class SilentKind:
    name = "silent"

    def load(self, value):
        if not value:
            raise UserError("--model silent: needs a name", field="--model", hint="silent:NAME")
        return value

    def available(self):
        return None

    def create(self, options):
        return Silent(f"silent:{options}")


class Broken:
    """Raises in the step its value names: check, open or close."""

    def __init__(self, where):
        self.name, self.where = f"broken:{where}", where

    def _fail(self, step):
        if self.where == step:
            raise RuntimeError(f"broken in {step}")

    def check(self, environ, why, hint=None):
        self._fail("check")

    @contextlib.contextmanager
    def open(self, environ, options):
        self._fail("open")
        yield OpenEndpoint(name=self.name, env={}, model=None)
        self._fail("close")


class BrokenKind:
    """An endpoint kind with a bug: it raises where `--model broken:WHERE` says."""

    name = "broken"

    def load(self, value):
        if value == "load":
            raise RuntimeError("broken in load")
        return value

    def available(self):
        return None

    def create(self, options):
        if options == "create":
            raise KeyError("broken in create")
        return Broken(options)


AGENT = ScriptedKind()
SANDBOX = AuditedKind()
GRADER = WordsKind()
ENDPOINT = SilentKind()
BROKEN = BrokenKind()
'''

SUITE = """\
version: 1
agent:
  kind: scripted
  files: {hello.txt: "hi from outside\\n"}
sandbox: {kind: audited, log: audit.log}
stage_map: null
stages:
  - name: build
    prompt: Write hello.txt.
    graders:
      - id: hello
        command: [sh, -c, 'test "$(cat hello.txt)" = "hi from outside"']
    words:
      - {id: greeting, file: hello.txt, min: 3}
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the example package installed (no download)."""
    root = tmp_path_factory.mktemp("third-party")
    source = root / "src"
    (source / PACKAGE).mkdir(parents=True)
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / PACKAGE / "__init__.py").write_text(MODULE)
    (source / "wheel_backend.py").write_text(WHEEL_BACKEND)
    env_dir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # This checkout (an editable install's finder is a .pth there too) and its
    # dependencies, as they are installed for the tests: nothing is fetched.
    ours = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "ci_evals_under_test.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n"
    )
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation",
         str(source)],
        check=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip
    return python


def run(
    python: Path, suite_dir: Path, *extra: str, model: str = "silent:quiet"
) -> subprocess.CompletedProcess[str]:
    """`ci-evals run` of the suite in `suite_dir`, on the package's endpoint: no model
    (the agent asks none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    argv = ["run", "--model", model, "--out", str(suite_dir / "out"), *extra]
    return subprocess.run(
        [python, "-m", "ci_evals", *argv], cwd=suite_dir, capture_output=True, text=True,
        env=env, check=False, timeout=300,
    )  # fmt: skip


def test_a_suite_runs_on_an_agent_sandbox_grader_and_endpoint_from_another_package(
    venv: Path, tmp_path: Path
) -> None:
    (tmp_path / "ci-evals.yaml").write_text(SUITE)
    done = run(venv, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert (results["sandbox"], results["isolated"]) == ("audited", False)
    assert results["model_endpoint"] == "silent:quiet"
    [stage] = results["scenarios"][0]["stages"]
    assert stage["status"] == "passed", stage
    # The package's grader ran after the built-in command grader, as its key orders it.
    graders = stage["grading"]["graders"]
    assert [g["grader"] for g in graders] == ["command:hello", "words"], stage
    [words] = graders[1]["criteria"]
    assert (words["id"], words["passed"], words["source"]) == ("greeting", True, "words"), words
    assert words["detail"] == "hello.txt: 3 word(s), at least 3"
    # `report` reads the source back, also where the package is not installed
    # (this interpreter: the trusted job that posts a fork's comment is one).
    for python in (venv, Path(sys.executable)):
        site = tmp_path / f"site-{python.parent.parent.name}"
        shown = subprocess.run(
            [python, "-m", "ci_evals", "report", str(tmp_path / "out"), "--html", str(site)],
            cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stdout + shown.stderr
        page = (site / "stage-1-1.html").read_text()
        assert "<td><code>greeting</code></td>" in page
        assert '</td><td>words</td><td class="reason">hello.txt: 3 word(s)' in page, page
    audit = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert ["put", str(Path(audit[0][1]).parent / "hello.txt")] == audit[0]  # the agent's write
    assert any(call[0] == "exec" and "test" in call[-1] for call in audit), audit  # the grader


def test_isolation_picks_another_packages_kind_with_the_options_the_suite_gives_it(
    venv: Path, tmp_path: Path
) -> None:
    suite = SUITE.replace(
        "sandbox: {kind: audited, log: audit.log}", "sandbox: {kind: local, audited: {log: a.log}}"
    )
    (tmp_path / "ci-evals.yaml").write_text(suite)
    done = run(venv, tmp_path, "--isolation", "audited")
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["sandbox"] == "audited"
    assert (tmp_path / "a.log").read_text().count('"put"') == 1  # the agent's write, audited


@pytest.mark.parametrize(
    ("suite", "expected"),
    [
        (
            SUITE.replace("sandbox: {kind: audited, log: audit.log}", "sandbox: {kind: k8s}"),
            "ci-evals.yaml:5:17: sandbox.kind: unknown sandbox 'k8s' (known: local, bwrap, docker, "
            "audited; a package adds one with an entry point in group ci_evals.sandboxes)",
        ),
        (
            SUITE.replace("{kind: audited, log: audit.log}", "{kind: local, audited: {lg: x}}"),
            "ci-evals.yaml:5:34: sandbox.audited.lg: unknown key 'lg' (known keys: kind, log)",
        ),
        (
            SUITE.replace("log: audit.log", "log: audit.log, depth: 3"),
            "ci-evals.yaml:5:42: sandbox.depth: unknown key 'depth' (known keys: kind, log)",
        ),
        (
            SUITE.replace('  files: {hello.txt: "hi from outside\\n"}', "  files: [x]"),
            "ci-evals.yaml:4:10: agent.files: expected a mapping of file names to text",
        ),
        (
            SUITE.replace("min: 3}", "min: many}"),
            "ci-evals.yaml:14:46: stages[0].words[0].min: expected an integer, got a string",
        ),
        (
            SUITE.replace("    words:", "    wordz:"),
            "ci-evals.yaml:13:5: stages[0].wordz: unknown key 'wordz' (known keys: ",
        ),
        (
            SUITE.replace("kind: scripted", "kind: scripted2"),
            "ci-evals.yaml:3:9: agent.kind: unknown agent 'scripted2' (known: claude, loop, "
            "scripted; a package adds one with an entry point in group ci_evals.agents)",
        ),
    ],
)
def test_a_bad_block_or_an_unknown_kind_is_one_line_at_its_place(
    venv: Path, tmp_path: Path, suite: str, expected: str
) -> None:
    (tmp_path / "ci-evals.yaml").write_text(suite)
    done = run(venv, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    if expected.endswith(": "):  # a list of every key follows
        assert line.startswith(f"ci-evals: error: {expected}"), line
    else:
        assert line == f"ci-evals: error: {expected}"


def test_an_endpoint_of_another_package_checks_its_own_value(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "ci-evals.yaml").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    done = subprocess.run(
        [venv, "-m", "ci_evals", "run", "--model", "silent:", "--out", str(tmp_path / "out")],
        cwd=tmp_path, capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        "ci-evals: error: --model: --model silent: needs a name (silent:NAME)"
    ]


@pytest.mark.parametrize(
    ("where", "error"),
    [
        ("load", "RuntimeError: broken in load"),
        ("create", "KeyError: 'broken in create'"),
        ("check", "RuntimeError: broken in check"),
        ("open", "RuntimeError: broken in open"),
        ("close", "RuntimeError: broken in close"),
    ],
)
def test_an_endpoint_of_another_package_that_raises_is_reported_as_theirs(
    venv: Path, tmp_path: Path, where: str, error: str
) -> None:
    (tmp_path / "ci-evals.yaml").write_text(SUITE)
    done = run(venv, tmp_path, model=f"broken:{where}")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    if where not in ("open", "close"):  # checked before anything starts: that line alone
        assert len(lines) == 1, done.stderr
    line = lines[-1]  # else after the run's progress
    assert line.startswith(
        "ci-evals: error: endpoint 'broken' (package ci-evals-example-backends 0.1, entry point "
        f"broken = {PACKAGE}:BROKEN in group ci_evals.endpoints) failed: {error} (a bug in that "
        "package, not in ci-evals: fix, update or uninstall it; traceback in "
    ), line
    log = Path(line.rsplit("traceback in ", 1)[1].rstrip(")"))
    assert f"broken in {where}" in log.read_text()  # where their code raised, for them
    log.unlink()


def test_the_kinds_are_read_only_when_a_name_is_not_built_in(venv: Path, tmp_path: Path) -> None:
    probe = textwrap.dedent(
        """
        import importlib.metadata as md, sys
        calls = []
        real = md.entry_points
        def counted(**kw):  # ours only (pydantic reads its plugins' group too)
            calls.extend([kw] if kw.get("group", "").startswith("ci_evals.") else [])
            return real(**kw)
        md.entry_points = counted
        from ci_evals.endpoints.registry import KINDS as ENDPOINTS, endpoint_for
        from ci_evals.grading.kinds.registry import KINDS as GRADERS
        from ci_evals.sandbox.registry import KINDS as SANDBOXES
        for kinds, builtin, added in [
            (SANDBOXES, "bwrap", "audited"),
            (GRADERS, "mcp", "words"),
            (ENDPOINTS, "stub", "silent"),
        ]:
            calls.clear()
            kinds.get(builtin)
            before = len(calls)
            kinds.get(added)
            print(before, len(calls))
        calls.clear()
        endpoint_for("stub:x.yaml"), endpoint_for(None), endpoint_for("claude-opus-4-1")
        print(len(calls), endpoint_for("silent:q").name)
        # A model id may hold a colon: a prefix nobody registered is part of the name,
        # and so is one with a dot, even where an entry point has that name.
        print(endpoint_for("us.anthropic.claude-sonnet-v2:0").model)
        print(endpoint_for("us.anthropic.claude-sonnet-v1:0").model)
        """
    )
    done = subprocess.run([venv, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [
        *("0", "1", "0", "1", "0", "1", "0", "silent:q"),
        "us.anthropic.claude-sonnet-v2:0",
        "us.anthropic.claude-sonnet-v1:0",
    ]
