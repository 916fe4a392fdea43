"""Command graders: run a program in the graded folder; exit 0 passes.

```yaml
graders:
  - id: plan-lint
    command: [python3, -m, labsmith_lint, lab/plan.json]   # argv, never a shell string
  - id: unit
    script: plugin:scripts/run-tests.sh     # a private copy, with the `files:` it names
    junit: report.xml                       # in $CI_EVALS_RESULTS: one criterion per test
  - id: hidden
    script: tests/check.sh                  # starts the agent's server via $CI_EVALS_AS_AGENT
    isolate_agent_code: true                # two identities: the verdict out of its reach
    json_results: hidden.json
```

The program runs in its own process group, stdin closed, in the sandbox and with
the environment the caller names; on timeout (or when it exits) the whole group
is ended. Fail closed: a command that cannot start, or a configured results file
missing, unreadable or empty after exit 0, makes the grader's result an error.
Every key, the two identities and what each can write: docs/grading.md#command-graders.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ci_evals.fs.copyable import named_problem
from ci_evals.fs.walk import walk
from ci_evals.sandbox.base import ON_HOST, SandboxConfig, SandboxLost

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import GradeContext, LoadContext
    from ci_evals.results.criteria import Criterion, GraderResult

MAX_OUTPUT_BYTES = 64 * 1024
DEFAULT_TIMEOUT_S = 300.0
MAX_RESULTS_BYTES = 16 * 1024 * 1024
_DETAIL_TAIL = 1000  # characters of output shown in a failing criterion's detail
_DRAIN_S = 2.0  # after the group is gone, how long the rest of the output may take
_DEFAULT_ENV = {"PATH": os.defpath, "LANG": "C.UTF-8"}
_RESULTS_ENV = "CI_EVALS_RESULTS"  # grader_identity.RESULTS_ENV, without its import

GRADER_KEYS = (
    "id",
    "command",
    "script",
    "files",
    "args",
    "cwd",
    "timeout_s",
    "junit",
    "json_results",
    "isolate_agent_code",
)
# What a grader that starts the code under test itself names (see `isolate_agent_code`).
_AS_AGENT_MARK = "CI_EVALS_AS_AGENT"


@dataclass(frozen=True)
class CommandGrader:
    id: str
    argv: tuple[str, ...]
    timeout_s: float = DEFAULT_TIMEOUT_S
    cwd: str = "."  # relative to the graded folder
    junit: str | None = None  # relative to $CI_EVALS_RESULTS
    json_results: str | None = None
    # A `script:`: its folder on the host, and what of it is copied for the run
    # (the script, then the suite's `files:`), relative to that folder.
    script_dir: Path | None = None
    files: tuple[str, ...] = ()
    # The two identities (`sandbox.grader_identity`): the command is the grader's,
    # the agent's code is started through $CI_EVALS_AS_AGENT. Off, the command
    # is the code under test's identity itself, and its verdict as trustworthy
    # as the agent's code it runs.
    isolate_agent_code: bool = False

    @property
    def name(self) -> str:
        return f"command:{self.id}"

    writes = True  # it runs in (and may change) a private copy
    sandboxed = True
    scoring = None  # its criteria are what its program reports

    def files_only(self) -> CommandGrader:
        return self  # it reads the folder only

    def grade(self, ctx: GradeContext) -> GraderResult:
        log = None if ctx.out_dir is None else ctx.out_dir / f"command-{safe_name(self.id)}.log"
        return run_command_grader(
            self, ctx.folder, env=ctx.env, output_path=log, sandbox=ctx.sandbox
        )


class _CommandKind:
    name = "graders"

    def available(self) -> str | None:
        return None  # the run's sandbox says whether it can run

    def load(self, value: LocatedNode, ctx: LoadContext) -> tuple[CommandGrader, ...]:
        return load_command_graders(
            value, suite_dir=ctx.suite_dir, plugin_dir=ctx.plugin_dir, within=ctx.within
        )


KIND = _CommandKind()


def safe_name(name: str) -> str:
    """`name` as a file name (a log's): anything but letters, digits, `-_.` becomes `_`."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


# -- loading -------------------------------------------------------------------


def load_command_graders(
    field: LocatedNode, *, suite_dir: Path, plugin_dir: Path, within: Path
) -> tuple[CommandGrader, ...]:
    """A stage's `graders:` list; ids must be unique. A `script:` and its `files:`
    lie in the repository (`within`), outside .git (`fs.copyable.named_problem`)."""
    graders: list[CommandGrader] = []
    seen: dict[str, int] = {}
    for item in field.sequence():
        grader = load_command_grader(
            item, suite_dir=suite_dir, plugin_dir=plugin_dir, within=within
        )
        if grader.id in seen:
            raise item.error(f"duplicate grader id {grader.id!r} (also line {seen[grader.id]})")
        seen[grader.id] = item.line
        graders.append(grader)
    return tuple(graders)


def load_command_grader(
    item: LocatedNode, *, suite_dir: Path, plugin_dir: Path, within: Path
) -> CommandGrader:
    keys = item.mapping(GRADER_KEYS, required=("id",), what="command grader")
    if ("command" in keys) == ("script" in keys):
        raise item.error("a command grader has exactly one of 'command' or 'script'")
    script_dir: Path | None = None
    files: tuple[str, ...] = ()
    if "command" in keys:
        for key in ("args", "files"):
            if key in keys:
                raise keys[key].error(f"'{key}' goes with 'script', not 'command'")
        command = keys["command"]
        if not isinstance(command.node, yaml.SequenceNode):
            raise command.error(
                "command must be a list of arguments",
                hint="e.g. [pytest, -q]; a shell string is never run (use script: for a script)",
            )
        argv = tuple(command.as_str_list(allow_empty=False))
    else:
        where = (suite_dir, plugin_dir, within)
        script = _script_path(keys["script"], *where)
        args = keys["args"].as_str_list() if "args" in keys else []
        argv = (str(script), *args)
        script_dir = script.parent
        named = keys["files"].sequence() if "files" in keys else []
        files = (script.name, *(_script_file(f, script_dir, *where) for f in named))
    timeout = DEFAULT_TIMEOUT_S
    if "timeout_s" in keys:
        timeout = keys["timeout_s"].as_number(minimum=0.001)
    if "junit" in keys and "json_results" in keys:
        raise keys["json_results"].error("use either 'junit' or 'json_results'")
    isolate = keys["isolate_agent_code"].as_bool() if "isolate_agent_code" in keys else False
    if not isolate and _names_as_agent(argv, script_dir, files):
        raise item.error(
            f"grader {keys['id'].as_str()!r} uses ${_AS_AGENT_MARK}, which only a grader "
            "with two identities gets",
            hint="add isolate_agent_code: true to it; docs/grading.md says why",
        )
    return CommandGrader(
        id=keys["id"].as_str(),
        argv=argv,
        timeout_s=timeout,
        cwd=inside_folder(keys["cwd"]) if "cwd" in keys else ".",
        junit=inside_folder(keys["junit"]) if "junit" in keys else None,
        json_results=inside_folder(keys["json_results"]) if "json_results" in keys else None,
        script_dir=script_dir,
        files=files,
        isolate_agent_code=isolate,
    )


def _names_as_agent(argv: Sequence[str], script_dir: Path | None, files: Sequence[str]) -> bool:
    """Whether the command, or a file of its script's, names $CI_EVALS_AS_AGENT: a
    grader written for two identities, which without them would start the
    agent's code as itself."""
    if any(_AS_AGENT_MARK in arg for arg in argv):
        return True
    for path in (script_dir / name for name in files) if script_dir is not None else ():
        if path.is_file() and _AS_AGENT_MARK.encode() in path.read_bytes()[: 1 << 20]:
            return True
    return False


def _named(value: LocatedNode, suite_dir: Path, plugin_dir: Path, within: Path) -> Path:
    """The path a `script:` or `files:` entry names (`plugin:PATH` or suite-relative),
    refused at its file:line when it is in a .git, absolute, or resolves (links
    followed) outside the repository `within` or into its .git."""
    text = value.as_str()
    base = plugin_dir if text.startswith("plugin:") else suite_dir
    name = text.removeprefix("plugin:")
    if _in_git(Path(name)):
        raise value.error(f"{text!r} is in a .git folder, which a grader never sees")
    problem = named_problem(name, base, within)
    if problem is not None:
        raise value.error(f"{text} {problem}")
    return base / name


def _script_path(value: LocatedNode, suite_dir: Path, plugin_dir: Path, within: Path) -> Path:
    text = value.as_str()
    path = _named(value, suite_dir, plugin_dir, within)
    if not path.is_file():
        raise value.error(
            f"script not found: {path}",
            hint="relative to the suite file; write plugin:PATH for the plugin folder",
        )
    if not os.access(path, os.X_OK):
        raise value.error(f"script is not executable: {path}", hint=f"chmod +x {text}")
    # Its real path: inside the repository (just checked), and the folder its
    # `files:` are copied from.
    return path.resolve()


def _script_file(
    value: LocatedNode, script_dir: Path, suite_dir: Path, plugin_dir: Path, within: Path
) -> str:
    """One of a script's `files:` (a file or folder next to it), relative to its folder."""
    text = value.as_str()
    _named(value, suite_dir, plugin_dir, within)
    base = plugin_dir if text.startswith("plugin:") else suite_dir
    where = os.path.normpath(base.resolve() / text.removeprefix("plugin:"))
    if not Path(where).is_relative_to(script_dir) or Path(where) == script_dir:
        raise value.error(
            f"{text!r} is not inside the script's folder {script_dir}",
            hint="the script runs from a copy of itself and of the files named here",
        )
    relative = Path(where).relative_to(script_dir)
    for depth in range(1, len(relative.parts) + 1):
        if (script_dir / Path(*relative.parts[:depth])).is_symlink():
            raise value.error(f"{text!r} is or passes through a symbolic link; name its target")
    if not (script_dir / relative).exists():
        raise value.error(f"not found: {script_dir / relative}")
    return relative.as_posix()


def _in_git(path: Path) -> bool:
    """Whether a path has a `.git` part (any case: `.GIT` is `.git` on a
    case-insensitive file system)."""
    return any(part.lower() == ".git" for part in path.parts)


def inside_folder(value: LocatedNode) -> str:
    """A path relative to the graded folder that stays inside it (file:line error otherwise)."""
    text = value.as_str()
    if Path(text).is_absolute() or ".." in Path(text).parts:
        raise value.error(f"{text!r} must be relative to the graded folder and stay inside it")
    return text


# -- running a process -----------------------------------------------------------


@dataclass(frozen=True)
class ProcessRun:
    returncode: int | None  # None when it timed out
    timed_out: bool
    output: bytes  # the last MAX_OUTPUT_BYTES of stdout+stderr
    dropped: int  # bytes cut from the front
    seconds: float

    def tail(self, limit: int = _DETAIL_TAIL) -> str:
        text = self.output.decode("utf-8", "replace")
        cut = self.dropped + max(0, len(text) - limit)
        return (f"[{cut} bytes cut] " if cut else "") + text[-limit:].strip()


def run_process(
    argv: Sequence[str],
    cwd: Path,
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    max_output: int = MAX_OUTPUT_BYTES,
    sandbox: SandboxConfig = ON_HOST,
    writable: Path | None = None,
    readonly: tuple[Path, ...] = (),
    grader_results: Path | None = None,
    shared_results: Path | None = None,
) -> ProcessRun:
    """Run `argv` in `cwd` inside a sandbox of kind `sandbox` that may write only
    `writable` (default: `cwd`) and read `readonly` besides the system; nothing
    it started outlives it. With `grader_results`, it runs as the grader's
    identity (`sandbox.grader_identity`), which alone writes that folder. With
    `shared_results` instead, that folder is one more writable one, named by
    $CI_EVALS_RESULTS: one identity, the command's.

    Raises OSError when the program cannot be started.
    """
    from ci_evals.sandbox.base import SandboxSpec  # noqa: PLC0415 - only when a grader runs
    from ci_evals.sandbox.registry import open_sandbox  # noqa: PLC0415

    folders = (writable or cwd, *(() if shared_results is None else (shared_results,)))
    spec = SandboxSpec(writable=folders, readonly=readonly, grader_results=grader_results)
    env = dict(_DEFAULT_ENV if env is None else env)
    if shared_results is not None:
        # Mounted at its own path in every sandbox (only the first folder moves).
        env[_RESULTS_ENV] = str(shared_results)
    with open_sandbox(sandbox, spec) as box:
        done = box.exec(
            argv,
            cwd=cwd,
            env=env,
            timeout=timeout_s,
            output_cap=max_output,
            merge_stderr=True,
        )
    return ProcessRun(
        returncode=done.returncode,
        timed_out=done.timed_out,
        output=done.stdout,
        dropped=done.stdout_dropped,
        seconds=done.duration_s,
    )


@contextmanager
def _private_folders(grader: CommandGrader) -> Iterator[tuple[tuple[str, ...], Path, Path | None]]:
    """The argv to run (a `script:` from its copy), the empty results folder, and
    the script copy's folder (None for a `command:`); all removed afterwards."""
    results = Path(tempfile.mkdtemp(prefix="ci-evals-results-"))  # mode 0700: ours alone
    copy = None
    try:
        argv = grader.argv
        if grader.script_dir is not None:
            copy = Path(tempfile.mkdtemp(prefix="ci-evals-script-"))
            copy.chmod(0o755)  # readable by the code under test's uid too
            for name in grader.files:
                _copy_named(grader.script_dir / name, copy / name)
            _open_to_all(copy)
            argv = (str(copy / grader.files[0]), *grader.argv[1:])
        yield argv, results, copy
    finally:
        shutil.rmtree(results, ignore_errors=True)
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)


def _open_to_all(copy: Path) -> None:
    """Make the script's copy readable (and what its owner may run, runnable) by
    every uid: the code under test's may be the one running it (`chmod 744`)."""
    # A folder is opened as the walk reaches it, before it is listed. The copy holds
    # no links (`_copy_named`); were one there, chmod would follow it: never touched.
    _open_one(str(copy))
    for _, kind, entry in walk(copy):
        if kind != "link":
            _open_one(entry.path)


def _open_one(path: str) -> None:
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    os.chmod(path, mode | 0o444 | (0o111 if mode & stat.S_IXUSR else 0))


def _copy_named(source: Path, target: Path) -> None:
    """A named file, or a folder without its `.git` and links, with its modes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_symlink():
        raise OSError(f"{source} is a symbolic link")
    if not source.is_dir():
        shutil.copy2(source, target)
        return
    shutil.copytree(
        source,
        target,
        symlinks=True,
        ignore=lambda folder, names: [
            n for n in names if n.lower() == ".git" or os.path.islink(os.path.join(folder, n))
        ],
    )


# -- grading ---------------------------------------------------------------------


def run_command_grader(
    grader: CommandGrader,
    folder: Path,
    *,
    env: Mapping[str, str] | None = None,
    output_path: Path | None = None,
    sandbox: SandboxConfig = ON_HOST,
) -> GraderResult:
    """Run one command grader in `folder`; write its (capped) output to `output_path`."""
    from ci_evals.results.criteria import GraderResult, RawOutput  # noqa: PLC0415

    folder = folder.resolve()
    name = f"command:{grader.id}"
    cwd = (folder / grader.cwd).resolve()
    if not cwd.is_dir() or not cwd.is_relative_to(folder):
        # The folder is the agent's output: a missing (or escaping) cwd is its failure.
        return GraderResult(grader=name, criteria=(_no_cwd(grader),))
    results_file = grader.junit or grader.json_results
    with _private_folders(grader) as (argv, results, copy):
        try:
            run = run_process(
                argv,
                cwd,
                timeout_s=grader.timeout_s,
                env=env,
                sandbox=sandbox,
                writable=folder,
                readonly=() if copy is None else (copy,),
                grader_results=results if grader.isolate_agent_code else None,
                shared_results=None if grader.isolate_agent_code else results,
            )
        except OSError as exc:
            return GraderResult(
                grader=name, error=f"cannot run {grader.argv[0]}: {exc.strerror or exc}"
            )
        except SandboxLost as exc:  # its engine or container is gone (one line naming it)
            return GraderResult(grader=name, error=str(exc))
        rows: list[Criterion] = []
        error = None
        if results_file is not None and not run.timed_out:
            try:
                rows = _sub_results(grader, results, results / results_file)
            except _ResultsMissing as exc:
                # After a failing exit a missing file is part of the failure, not an error.
                error = str(exc) if run.returncode == 0 else None
            except ValueError as exc:
                error = str(exc)
    raw = None
    if output_path is not None:
        output_path.parent.mkdir(parents=True, exist_ok=True)
        output_path.write_bytes(run.output)
        raw = RawOutput(
            path=str(output_path),
            sha256=hashlib.sha256(run.output).hexdigest(),
            size=len(run.output),
        )
    criteria = (_exit_criterion(grader, run), *rows)
    return GraderResult(grader=name, criteria=criteria, error=error, raw_output=raw)


def _exit_criterion(grader: CommandGrader, run: ProcessRun) -> Criterion:
    from ci_evals.results.criteria import Criterion  # noqa: PLC0415

    if run.timed_out:
        detail = f"timed out after {grader.timeout_s:g}s (process group killed)"
    else:
        detail = f"exit {run.returncode} in {run.seconds:.2f}s"
    passed = run.returncode == 0
    if not passed and run.output:
        detail += f"; output: {run.tail()}"
    return Criterion(
        id=grader.id,
        kind="checklist",
        score=1.0 if passed else 0.0,
        passed=passed,
        source="command",
        detail=detail,
    )


def _no_cwd(grader: CommandGrader) -> Criterion:
    from ci_evals.results.criteria import Criterion  # noqa: PLC0415

    return Criterion(
        id=grader.id,
        kind="checklist",
        score=0.0,
        passed=False,
        source="command",
        detail=f"not run: {grader.cwd} is not a folder inside the graded folder",
    )


class _ResultsMissing(ValueError):
    pass


def _read_results(path: Path, shown: str) -> bytes:
    # Under `local` the code under test could have planted a link to /dev/zero or
    # a FIFO there, which a plain read would never finish: opened without
    # blocking or following a last link, only a regular file is read, and no
    # more of it than a results file may hold.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise _ResultsMissing(f"results file {shown} was not written") from None
    except OSError as exc:
        raise ValueError(f"results file {shown} cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"results file {shown} is not a regular file")
        data = file.read(MAX_RESULTS_BYTES + 1)
    if len(data) > MAX_RESULTS_BYTES:
        raise ValueError(f"results file {shown} is larger than {MAX_RESULTS_BYTES} bytes")
    return data


def _sub_results(grader: CommandGrader, results: Path, path: Path) -> list[Criterion]:
    shown = f"$CI_EVALS_RESULTS/{path.relative_to(results).as_posix()}"
    if not Path(os.path.realpath(path.parent)).is_relative_to(results.resolve()):
        raise ValueError(f"results file {shown} points outside the results folder")
    data = _read_results(path, shown)
    rows = _junit(data, shown) if grader.junit else _json_rows(data, shown)
    if not rows:
        raise ValueError(f"results file {shown} lists no results")
    return _criteria(grader.id, rows)


@dataclass(frozen=True)
class _Row:
    name: str
    passed: bool | None  # None: skipped
    detail: str


def _junit(data: bytes, shown: str) -> list[_Row]:
    # The stdlib parser is safe here: expat >= 2.4.1 refuses entity-expansion
    # bombs, and external entities are never fetched.
    import xml.etree.ElementTree as ET  # noqa: PLC0415

    try:
        root = ET.fromstring(data)  # noqa: S314
    except ET.ParseError as exc:
        raise ValueError(f"results file {shown} is not valid JUnit XML: {exc}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise ValueError(f"results file {shown}: root element is <{root.tag}>, not <testsuite(s)>")
    rows = []
    for case in root.iter("testcase"):
        name = case.get("name") or "(unnamed)"
        classname = case.get("classname")
        full = f"{classname}.{name}" if classname else name
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            message = problem.get("message") or (problem.text or "").strip()
            rows.append(_Row(full, False, f"{problem.tag}: {_first_line(message)}"))
        elif case.find("skipped") is not None:
            rows.append(_Row(full, None, "skipped"))
        else:
            rows.append(_Row(full, True, ""))
    return rows


def _json_rows(data: bytes, shown: str) -> list[_Row]:
    try:
        value: Any = json.loads(data)
    except RecursionError:
        raise ValueError(f"results file {shown} is nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"results file {shown} is not valid JSON: {exc}") from None
    if not isinstance(value, list):
        raise ValueError(f"results file {shown} must hold a JSON array of {{name, passed}}")
    rows = []
    for index, item in enumerate(value):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("name"), str)
            or not item["name"].strip()
            or not isinstance(item.get("passed"), bool)
        ):
            raise ValueError(
                f"results file {shown}: item {index} is not {{name: string, passed: boolean}}"
            )
        detail = item.get("detail", "")
        rows.append(_Row(item["name"].strip(), item["passed"], str(detail or "")))
    return rows


def _criteria(grader_id: str, rows: list[_Row]) -> list[Criterion]:
    from ci_evals.results.criteria import Criterion  # noqa: PLC0415

    criteria = []
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.name] = counts.get(row.name, 0) + 1
        suffix = "" if counts[row.name] == 1 else f"#{counts[row.name]}"
        criteria.append(
            Criterion(
                id=f"{grader_id}/{row.name}{suffix}",
                kind="checklist",
                score=None if row.passed is None else float(row.passed),
                passed=bool(row.passed),
                # A skipped test says nothing either way: reported, never failing.
                advisory=row.passed is None,
                source="command",
                detail=row.detail,
            )
        )
    return criteria


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."
