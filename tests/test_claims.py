"""The "one place that ..." sentences of ci_evals' module docstrings, kept true.

A module that says it is the one place that runs git, the one way a program is
run, the one tree walk, the one atomic write, the one reader of front matter or
of `results.json`, the one error printer, the one way to build an agent or
open a sandbox, or the command that reads the environment once is believed by
whoever reads it: a second way in makes the sentence a lie. Each rule here
scans the source of every module (its syntax tree: what the code does, not what
a comment says) and names each place that breaks it. An allowlist entry says
why that place is no second way; the `test_rule_catches` cases feed each rule a
module that breaks it, so a rule that stopped seeing anything would fail too.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator, Mapping

import pytest

from tests.paths import REPO

PACKAGE = REPO / "ci_evals"

Sources = Mapping[str, ast.Module]  # path relative to ci_evals/ (POSIX) -> its tree
Rule = Callable[[Sources], list[str]]  # the places breaking it, as `path:line: what`


@functools.cache
def _package() -> dict[str, ast.Module]:
    return {
        path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


# id -> (the tree, kept alive so that its id is never reused; its nodes)
_NODES: dict[int, tuple[ast.Module, list[ast.AST]]] = {}


def _nodes(tree: ast.Module) -> list[ast.AST]:
    """`ast.walk(tree)`, kept: every rule walks every module."""
    if id(tree) not in _NODES:
        _NODES[id(tree)] = (tree, list(ast.walk(tree)))
    return _NODES[id(tree)][1]


def _dotted(node: ast.expr) -> str:
    """`os.replace` for `os.replace`, `walk` for `walk`; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else f"?.{node.attr}"
    return ""


def _calls(tree: ast.Module) -> list[tuple[ast.Call, str]]:
    """Every call in `tree`, with the dotted name it calls."""
    return [(node, _dotted(node.func)) for node in _nodes(tree) if isinstance(node, ast.Call)]


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring constants (a docstring may name anything)."""
    found = set()
    for node in _nodes(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            found.add(id(first.value))
    return found


def _strings(tree: ast.Module) -> Iterator[ast.Constant]:
    """Every str or bytes constant but docstrings (f-string pieces included)."""
    skip = _docstrings(tree)
    for node in _nodes(tree):
        if not isinstance(node, ast.Constant) or id(node) in skip:
            continue
        if isinstance(node.value, str | bytes):
            yield node


# --- git.py: "The one place that runs git" ---------------------------------------


def git_spawned_elsewhere(sources: Sources) -> list[str]:
    """An argv written as a list or tuple starting with "git", outside git.py."""
    return [
        f"{path}:{node.lineno}: an argv starting with 'git'"
        for path, tree in sources.items()
        if path != "git.py"
        for node in _nodes(tree)
        if isinstance(node, ast.List | ast.Tuple)
        and node.elts
        and isinstance(node.elts[0], ast.Constant)
        and node.elts[0].value == "git"
    ]


# --- process.py: "The one way ci-evals runs a program" ------------------------------

# What starts a program without `process`, and why each may.
PROCESS_STARTERS = {
    # The claude-agent-sdk transport starts the CLI itself (process.py says so).
    "agents/claude.py": "the SDK's transport (anyio.open_process) starts the agent CLI",
    # Both run as their own scripts (`python3 -I -S launch.py`), no ci_evals imported.
    "sandbox/launch.py": "the launcher between ci-evals and a sandboxed program: forks its reaper",
    "sandbox/relay.py": "runs inside the sandbox, where the package is not visible",
}
_STARTS = re.compile(
    r"(os\.(fork|forkpty|exec\w*|spawn\w*|system|popen|posix_spawn\w*)"
    r"|asyncio\.create_subprocess_\w+|anyio\.(open|run)_process|pty\.spawn)"
)


def programs_started_elsewhere(sources: Sources) -> list[str]:
    """`import subprocess` outside process.py; a fork, exec or spawn outside it and
    the allowlist."""
    found = []
    for path, tree in sources.items():
        if path == "process.py":
            continue
        for node in _nodes(tree):
            if isinstance(node, ast.Import) and any(a.name == "subprocess" for a in node.names):
                found.append(f"{path}:{node.lineno}: imports subprocess")
            elif isinstance(node, ast.ImportFrom) and node.module == "subprocess":
                found.append(f"{path}:{node.lineno}: imports from subprocess")
        if path in PROCESS_STARTERS:
            continue
        found += [
            f"{path}:{call.lineno}: {name}()"
            for call, name in _calls(tree)
            if _STARTS.fullmatch(name)
        ]
    return found


# --- fs/walk.py: "The one tree walk ... one link policy" ---------------------------

# A walk of its own, and why it may.
OWN_WALKS = {
    # The hot path (compute-stage): a folder holding a case file is not descended
    # into, which `fs.walk` (no pruning) cannot say; links are not entered, as there.
    "selection/case_index.py": "prunes each case folder as its case file is seen",
}


def trees_walked_elsewhere(sources: Sources) -> list[str]:
    """`os.walk`, `rglob` or a `**` glob outside fs/walk.py and the allowlist."""
    found = []
    for path, tree in sources.items():
        if path == "fs/walk.py" or path in OWN_WALKS:
            continue
        for call, name in _calls(tree):
            recursive_glob = name.endswith(".glob") and any(
                isinstance(a, ast.Constant) and "**" in str(a.value) for a in call.args
            )
            if name == "os.walk" or name.endswith(".rglob"):
                found.append(f"{path}:{call.lineno}: {name}()")
            elif recursive_glob:
                found.append(f"{path}:{call.lineno}: a recursive glob")
    return found


# --- fs/atomic.py: "The one atomic file write" -------------------------------------

# A rename outside fs/atomic.py, and why it is no atomic write of a file.
RENAMES = {
    # A folder built beside its target and swapped in whole.
    "report/html/__init__.py": "the site's folder, swapped in whole",
    "commands/import_run.py": "the run folder, swapped in whole",
    "commands/fixtures.py": "the fixture folder, swapped in (the old one kept to roll back)",
    # A file moved, not written.
    "agents/retry.py": "a failed attempt's logs moved aside",
    "grading/reviewer/untrusted.py": "an agent's file moved aside from the reviewer",
    "fs/state.py": "a restored state's entries moved from their staging folder",
    # Written by another program.
    "sandbox/docker/image_build.py": "tar's archive, renamed once tar has finished",
}


def renames_elsewhere(sources: Sources) -> list[str]:
    """`os.replace`, `os.rename` or a `.rename()` outside fs/atomic.py and the allowlist
    (`Path.replace` cannot be told from `str.replace` here: not looked for)."""
    return [
        f"{path}:{call.lineno}: {name}()"
        for path, tree in sources.items()
        if path != "fs/atomic.py" and path not in RENAMES
        for call, name in _calls(tree)
        if name in ("os.replace", "os.rename", "os.renames") or name.endswith(".rename")
    ]


# --- results: the one reader (and writer) of results.json --------------------------

# What parses JSON, or reads a file for it (`fs.json_input`): not `read_results` nor
# `read_top_fields`, nor a read of the bytes to hash them (`run --resume`'s digest).
_READS = re.compile(r"((\w+|\?)\.)?(loads?|load_file|read_file|parse|model_validate\w*)")


def _names_results(node: ast.AST, tainted: set[str]) -> bool:
    """Whether `node` mentions `RESULTS_FILE`, "results.json" or a name made from them."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and (inner.id == "RESULTS_FILE" or inner.id in tainted):
            return True
        if isinstance(inner, ast.Attribute) and inner.attr == "RESULTS_FILE":
            return True
        if isinstance(inner, ast.Constant) and inner.value == "results.json":
            return True
    return False


def results_read_elsewhere(sources: Sources) -> list[str]:
    """Outside `ci_evals/results/`: a results file parsed by hand (a path made from
    `RESULTS_FILE` or "results.json", followed through a function's assignments),
    instead of `read_results` or `top_fields`."""
    found = []
    for path, tree in sources.items():
        if path.startswith("results/"):
            continue
        for function in _nodes(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            assigns = [n for n in ast.walk(function) if isinstance(n, ast.Assign)]
            tainted: set[str] = set()
            while True:  # a name made from a results path is one too
                more = {
                    target.id
                    for a in assigns
                    if _names_results(a.value, tainted)
                    for target in a.targets
                    if isinstance(target, ast.Name) and target.id not in tainted
                }
                if not more:
                    break
                tainted |= more
            for call in ast.walk(function):
                name = _dotted(call.func) if isinstance(call, ast.Call) else ""
                if not isinstance(call, ast.Call) or not _READS.fullmatch(name):
                    continue
                read = [*call.args, *(k.value for k in call.keywords)]
                if any(_names_results(arg, tainted) for arg in read):
                    found.append(f"{path}:{call.lineno}: {function.name} reads it with {name}()")
    return sorted(set(found))


# --- config/front_matter.py: "The one reader of ... YAML front matter" -------------

# A front matter block looked for outside config/front_matter.py: (module, the pattern
# or prefix) and why. Each is one literal, so a second reader in the module still fails.
OWN_FRONT_MATTER = {
    # The hot path (compute-stage) compares a reviewer agent's head as bytes, failing
    # closed (an unclosed block counts whole): no YAML, and no rule to disagree with.
    ("selection/grader_change.py", "---"): "where the raw head of an agent file starts",
    ("selection/grader_change.py", "\n---"): "where the raw head of an agent file ends",
    # A case without a block (most) is read without importing YAML; one that opens a
    # block is read with `read_front_matter`.
    ("selection/case_index.py", r"\ufeff?---\s*\n"): "whether a file opens a block",
    # An opening `---` never closed is an error for a case (the CLI's), where
    # `read_front_matter` (Claude Code's loader) reads the whole file as body.
    ("suite/plugin_evals.py", r"---[ \t\r]*\n"): "refuses an opening `---` never closed",
}
# `---` opening a pattern or prefix, then the end, a newline or a space class (not
# `--- ` of a diff's header).
_OPENS_BLOCK = re.compile(r"(\^|\\A)?(\\ufeff\??|\ufeff\??)?(\\n|\n)?---($|\\s|\[|\n|\\n|\r|\\r)")
_FINDERS = {"compile", "match", "search", "fullmatch", "split", "startswith", "find", "index"}


def front_matter_read_elsewhere(sources: Sources) -> list[str]:
    """A pattern or prefix opening with `---`, searched for outside front_matter.py."""
    found = []
    for path, tree in sources.items():
        if path == "config/front_matter.py":
            continue
        for call, name in _calls(tree):
            if name.split(".")[-1] not in _FINDERS:
                continue
            for arg in call.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str | bytes):
                    value = arg.value
                    text = value.decode("latin-1") if isinstance(value, bytes) else value
                    if _OPENS_BLOCK.match(text) and (path, text) not in OWN_FRONT_MATTER:
                        found.append(f"{path}:{call.lineno}: {name}({text!r})")
    return found


# --- errors.py: "The one user-facing error type, and the handler that prints it" ---


# An `error: ` line written outside errors.py, and why.
OWN_ERROR_LINES = {
    # With `--json`, argparse's own refusal is also the JSON document; its line is
    # argparse's (`PROG: error: MESSAGE`), as without `--json`.
    "commands/output.py": "argparse's usage error, in argparse's words",
}


def errors_printed_elsewhere(sources: Sources) -> list[str]:
    """An `error: ` line of a command's own, outside errors.py: a user's mistake is a
    `UserError`, and `error_handler` (or `print_user_error`) prints it."""
    return [
        f"{path}:{node.lineno}: {node.value!r}"
        for path, tree in sources.items()
        if path != "errors.py" and path not in OWN_ERROR_LINES
        for node in _strings(tree)
        if isinstance(node.value, str) and re.search(r"(^|: )error: ", node.value)
    ]


# --- agents/registry.py and sandbox/registry.py: the one factory, the one way to open --


def _classes_with(sources: Sources, methods: set[str]) -> set[str]:
    """The classes defining all of `methods`, and every class below one of them."""
    classes = {
        node.name: node
        for tree in sources.values()
        for node in _nodes(tree)
        if isinstance(node, ast.ClassDef)
    }
    found = {
        name
        for name, node in classes.items()
        if methods
        <= {f.name for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
        and not any(_dotted(b).endswith("Protocol") for b in node.bases)
    }
    while True:
        more = {
            name
            for name, node in classes.items()
            if name not in found and any(_dotted(b).split(".")[-1] in found for b in node.bases)
        }
        if not more:
            return found
        found |= more


def _made_elsewhere(
    sources: Sources, methods: set[str], package: str, factory: str, by_kind: tuple[str, int]
) -> list[str]:
    """A class defining `methods` made outside `package`, or a kind's method `by_kind`
    (its name and how many arguments it takes: an endpoint kind's `create` takes one,
    an agent kind's none) called outside the `factory` module."""
    classes = _classes_with(sources, methods)
    method, arity = by_kind
    found = []
    for path, tree in sources.items():
        for call, name in _calls(tree):
            made = name.split(".")[-1] in classes and not path.startswith(package)
            kind = (
                name.endswith(f".{method}")
                and len(call.args) == arity
                and re.search(r"kind|KINDS", ast.unparse(call.func))
            )
            if made or (kind and path != factory):
                found.append(f"{path}:{call.lineno}: {ast.unparse(call.func)}()")
    return found


def agents_built_elsewhere(sources: Sources) -> list[str]:
    """An agent backend (a class with `run_stage`) made outside `ci_evals/agents/`, or a
    kind's `create()` called outside agents/registry.py (`build_agent`)."""
    return _made_elsewhere(sources, {"run_stage"}, "agents/", "agents/registry.py", ("create", 0))


def sandboxes_opened_elsewhere(sources: Sources) -> list[str]:
    """A sandbox (a class with `spawn` and `exec`) made outside `ci_evals/sandbox/`, or a
    kind's `open()` called outside sandbox/registry.py (`open_sandbox`)."""
    return _made_elsewhere(
        sources, {"spawn", "exec"}, "sandbox/", "sandbox/registry.py", ("open", 2)
    )


# --- the environment: `ci-evals run` reads it once (run/process_environment.py) ----

# run/ modules that touch the process's own environment to change it, not to read a
# setting: each is a security step on the process itself.
ENVIRON_WRITERS = {
    "run/environ_block.py": "puts a hidden credential back into os.environ for the proxy",
    "run/shard_mac.py": "pops the shard key out of the process's own environment",
}


def environ_read_in_run(sources: Sources) -> list[str]:
    """`os.environ` or `os.getenv` in a run/ module outside ENVIRON_WRITERS: the
    command takes the environment once and hands it down."""
    return [
        f"{path}:{node.lineno}: {_dotted(node)}"
        for path, tree in sources.items()
        if path.startswith("run/") and path not in ENVIRON_WRITERS
        for node in _nodes(tree)
        if isinstance(node, ast.Attribute) and _dotted(node) in ("os.environ", "os.getenv")
    ]


RULES: dict[str, Rule] = {
    "git": git_spawned_elsewhere,
    "process": programs_started_elsewhere,
    "walk": trees_walked_elsewhere,
    "atomic": renames_elsewhere,
    "results": results_read_elsewhere,
    "front_matter": front_matter_read_elsewhere,
    "errors": errors_printed_elsewhere,
    "agents": agents_built_elsewhere,
    "sandboxes": sandboxes_opened_elsewhere,
    "environ": environ_read_in_run,
}


@pytest.mark.parametrize("rule", RULES)
def test_claim_holds(rule: str) -> None:
    assert RULES[rule](_package()) == []


# One module breaking each rule, as the stragglers this file was written after did.
BROKEN = {
    "git": ("selection/x.py", 'argv = ("git", "-C", repo, "diff-tree", "--stdin")'),
    "process": ("sandbox/x.py", "import subprocess\nsubprocess.run(['bwrap'])"),
    "walk": ("suite/x.py", 'found = sorted(path.rglob("*.md"))'),
    "atomic": ("selection/x.py", "tmp.write_bytes(data)\nos.replace(tmp, path)"),
    "results": (
        "endpoints/x.py",
        "def read(folder):\n    path = folder / RESULTS_FILE\n"
        "    data = json_input.read_file(path, LIMIT)\n    return json_input.parse(data)",
    ),
    "front_matter": ("suite/x.py", r'_BLOCK = re.compile(r"---\s*\n(.*?)---\s*\n?", re.DOTALL)'),
    "errors": ("main.py", 'print(f"ci-evals: error: unknown command {name!r}")'),
    "agents": ("run/x.py", "agent = ClaudeAgent()"),
    "sandboxes": ("run/x.py", "box = kind_of(config).open(spec, config.options)"),
    "environ": ("run/x.py", 'key = os.environ.get("ANTHROPIC_API_KEY")'),
}


@pytest.mark.parametrize("rule", RULES)
def test_rule_catches(rule: str) -> None:
    path, source = BROKEN[rule]
    # The agent and sandbox rules know their classes from the package's definitions.
    others = _package() if rule in ("agents", "sandboxes") else {}
    found = RULES[rule]({**others, path: ast.parse(source)})
    assert found and all(f.startswith(f"{path}:") for f in found), found


def test_allowlists_name_modules_that_exist() -> None:
    """An entry whose module moved or went away would excuse nothing, silently."""
    front_matter = [path for path, _ in OWN_FRONT_MATTER]
    listed = [
        *PROCESS_STARTERS,
        *OWN_WALKS,
        *RENAMES,
        *front_matter,
        *OWN_ERROR_LINES,
        *ENVIRON_WRITERS,
    ]
    assert [path for path in listed if path not in _package()] == []


def test_allowlisted_modules_still_need_it() -> None:
    """An exception no longer needed is removed, so the list stays the true one."""
    package = _package()
    stale = [
        path
        for allowlist, rule in (
            (OWN_WALKS, trees_walked_elsewhere),
            (RENAMES, renames_elsewhere),
            (OWN_ERROR_LINES, errors_printed_elsewhere),
            (PROCESS_STARTERS, programs_started_elsewhere),
            (ENVIRON_WRITERS, environ_read_in_run),
        )
        for path in allowlist
        if not rule({f"{path}.copy": package[path]})
    ]
    found = front_matter_read_elsewhere(
        {f"{path}.copy": package[path] for path in {path for path, _ in OWN_FRONT_MATTER}}
    )
    stale += [
        f"{path}: {text!r}"
        for path, text in OWN_FRONT_MATTER
        if not any(f.startswith(f"{path}.copy:") and f.endswith(f"({text!r})") for f in found)
    ]
    assert stale == []
