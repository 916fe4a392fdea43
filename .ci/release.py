"""The release check: what a tag would publish is built and used as a user would use it.

`python -m build` makes the sdist and, from the unpacked sdist, the wheel. Then:
the wheel holds exactly the package's tracked files (code and its data: the
sandbox recipes, the no-plugin manifest, py.typed), the sdist every tracked file
of the repository (the tests read the example, the fixtures, the workflows and
the hooks), the versions agree (and match the tag, when given one), a tag has its
CHANGELOG.md entry, the metadata a package index shows is complete
(`check_metadata`: what `twine check` checks, offline, and the links of the
page), and the wheel, installed with its `run` extra in a clean venv, runs
`ci-evals --version` and the quickstart's example suite on the stub model — in
a copy of the repository without `ci_evals/`, so nothing can be imported from
the source tree. Installed alone (no extra, as `pipx run` / `uvx` install it),
it runs the hook's commands there too.

    python .ci/release.py [--out DIR] [--expect-version v0.1.0]

Exits 1 with one line per problem; the temporary folders go in every case.
"""

from __future__ import annotations

import argparse
import email.parser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The README's quickstart, its first run (the full five-stage run adds minutes, no code).
QUICKSTART = ["run", "--model", "stub:examples/labsmith/stub/labsmith.yaml", "--from-stage", "4"]
# What setuptools writes into every sdist beside the tracked files.
SDIST_GENERATED = re.compile(r"PKG-INFO|setup\.cfg|ci_evals\.egg-info/.*")
# The package index page (pyproject's `readme`): short, not the whole README.
LONG_DESCRIPTION = "PYPI.md"
CHANGELOG = "CHANGELOG.md"
MAX_DESCRIPTION_LINES = 80
# What the index page needs of the core metadata (PEP 566, 639, 753).
REQUIRED_FIELDS = ("Name", "Version", "Summary", "Requires-Python", "License-Expression")
REQUIRED_URLS = ("Homepage", "Source", "Issues", "Changelog")
# A Markdown link or image target: relative ones lead nowhere on an index page.
LINK_TARGET = re.compile(r"\]\(([^)\s]+)[^)]*\)")
# Variables that would let the venv import something other than the wheel.
LEAKY_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")


class ReleaseError(Exception):
    """One line saying what is wrong with the release and what to do."""


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise ReleaseError(f"`{' '.join(argv)}` exited {done.returncode}:\n{tail}")
    return done.stdout


def tracked(under: str = "") -> set[str]:
    """The tracked files that exist in the work tree (what `python -m build` sees)."""
    out = run(["git", "ls-files", "-z", "--", *([under] if under else [])], ROOT)
    return {path for path in out.split("\0") if path and (ROOT / path).is_file()}


def differences(what: str, built: set[str], wanted: set[str], fix: str) -> list[str]:
    problems = [f"{what} lacks {path} ({fix})" for path in sorted(wanted - built)]
    return problems + [f"{what} holds untracked {path}" for path in sorted(built - wanted)]


def check_contents(wheel: Path, sdist: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = {n for n in archive.namelist() if not n.endswith("/")}
    package = {n for n in in_wheel if n.startswith("ci_evals/")}
    problems = differences(
        wheel.name, package, tracked("ci_evals"), "[tool.setuptools.package-data]"
    )
    with tarfile.open(sdist) as archive:
        names = {m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile()}
    sources = {n for n in names if not SDIST_GENERATED.fullmatch(n)}
    return problems + differences(sdist.name, sources, tracked(), "MANIFEST.in")


def check_metadata(wheel: Path, sdist: Path) -> list[str]:
    """What `twine check` and an index page need, offline: the core fields, the project
    URLs, classifiers, the long description as Markdown (PYPI.md, short, every link
    absolute), and the sdist's PKG-INFO saying the same. Both files are UTF-8 (core
    metadata 2.1+), the description their body."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        wheel_meta = email.parser.Parser().parsestr(archive.read(name).decode("utf-8"))
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"{sdist.name.removesuffix('.tar.gz')}/PKG-INFO")
        if member is None:
            return [f"{sdist.name} has no PKG-INFO"]
        sdist_meta = email.parser.Parser().parsestr(member.read().decode("utf-8"))
    problems = [f"{wheel.name}: no {f} in METADATA" for f in REQUIRED_FIELDS if not wheel_meta[f]]
    urls = {u.split(",", 1)[0].strip() for u in wheel_meta.get_all("Project-URL") or []}
    problems += [f"{wheel.name}: no Project-URL {u}" for u in REQUIRED_URLS if u not in urls]
    classifiers = wheel_meta.get_all("Classifier") or []
    if not classifiers:
        problems.append(f"{wheel.name}: no Classifier ([project] classifiers)")
    if not str(wheel_meta.get("Description-Content-Type", "")).startswith("text/markdown"):
        problems.append(f"{wheel.name}: the long description is not declared text/markdown")
    description = wheel_meta.get_payload()
    wanted = (ROOT / LONG_DESCRIPTION).read_text(encoding="utf-8")
    if not isinstance(description, str) or description.strip() != wanted.strip():
        problems.append(f"{wheel.name}: the long description is not {LONG_DESCRIPTION}")
    elif len(description.splitlines()) > MAX_DESCRIPTION_LINES:
        problems.append(
            f"{LONG_DESCRIPTION}: over {MAX_DESCRIPTION_LINES} lines: the index page is "
            "a summary (README.md is the manual)"
        )
    for target in LINK_TARGET.findall(wanted):
        if not target.startswith("https://"):
            problems.append(f"{LONG_DESCRIPTION}: the link {target} is not absolute (https://)")
    for field in ("Name", "Version", "Summary", "Description-Content-Type"):
        if sdist_meta[field] != wheel_meta[field]:
            problems.append(f"{sdist.name} and {wheel.name} differ in {field}")
    return problems


def check_changelog(version: str) -> list[str]:
    """A tag's version has its entry in CHANGELOG.md (kept by hand): `## 1.2.3 …`."""
    heading = re.compile(rf"## {re.escape(version)}(\s|$)")
    text = (ROOT / CHANGELOG).read_text(encoding="utf-8")
    if any(heading.match(line) for line in text.splitlines()):
        return []
    return [f"{CHANGELOG} has no `## {version}` entry: say what this release changes"]


def snapshot(dest: Path) -> None:
    """The repository's tracked files but the package, committed in a new git repository."""
    for path in tracked():
        if path.startswith("ci_evals/"):
            continue
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, dest / path)
    ident = ["-c", "user.name=release-check", "-c", "user.email=release-check@localhost"]
    run(["git", "init", "-q"], dest)
    run(["git", "add", "-A"], dest)
    run(["git", *ident, "commit", "-q", "--no-verify", "-m", "snapshot"], dest)


def check_installed(wheel: Path, work: Path, version: str) -> list[str]:
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)], work)
    env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    started = time.monotonic()
    run([*pip, "--disable-pip-version-check", f"{wheel}[run]"], work, env)
    took = time.monotonic() - started
    print(f"release: installed {wheel.name}[run] in a new venv in {took:.1f}s")
    problems = []
    printed = run([str(venv / "bin" / "ci-evals"), "--version"], work, env).strip()
    if printed != f"ci-evals {version}":
        problems.append(f"`ci-evals --version` prints {printed!r}, the wheel is {version}")
    repo = work / "repo"
    repo.mkdir()
    snapshot(repo)
    probe = "import ci_evals, sys; sys.stdout.write(ci_evals.__file__ or '')"
    where = run([str(venv / "bin" / "python"), "-c", probe], repo, env)
    if not Path(where).is_relative_to(venv):
        problems.append(f"the venv imports ci_evals from {where}, not from the wheel")
    started = time.monotonic()
    run([str(venv / "bin" / "ci-evals"), *QUICKSTART], repo, env)
    print(f"release: the quickstart passed on the wheel in {time.monotonic() - started:.1f}s")
    return problems + check_core(wheel, work, repo, env)


def check_core(wheel: Path, work: Path, repo: Path, env: dict[str, str]) -> list[str]:
    """The wheel without an extra in a venv of its own (what `pipx run` / `uvx` make of it):
    the hook's commands run in the repository, and `report` reads the quickstart's run."""
    venv = work / "core-venv"
    run([sys.executable, "-m", "venv", str(venv)], work)
    env = {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    run([*pip, "--disable-pip-version-check", str(wheel)], work, env)
    tool = str(venv / "bin" / "ci-evals")
    run([tool, "check-coverage"], repo, env)
    run([tool, "compute-stage", "HEAD"], repo, env)
    runs = sorted((repo / ".ci-evals" / "runs").glob("*/results.json"))
    if not runs:
        return ["the quickstart left no run folder under .ci-evals/runs/ for `report`"]
    report = subprocess.run(
        [tool, "report", str(runs[-1].parent)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if report.returncode != 0:
        return [f"`ci-evals report` on the wheel alone: {report.stderr.strip()!r}"]
    print("release: the wheel alone ran check-coverage, compute-stage and report")
    return []


def release_check(out: Path, expected: str | None) -> list[str]:
    started = time.monotonic()
    run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], ROOT)
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise ReleaseError(f"{out}: expected one wheel and one sdist, found {wheels + sdists}")
    wheel, sdist = wheels[0], sdists[0]
    version = wheel.name.split("-")[1]
    print(f"release: built {wheel.name}, {sdist.name} in {time.monotonic() - started:.1f}s")
    problems = check_contents(wheel, sdist) + check_metadata(wheel, sdist)
    if sdist.name != f"ci_evals-{version}.tar.gz":
        problems.append(f"{sdist.name} and {wheel.name} differ in version")
    if expected is not None and expected.removeprefix("v") != version:
        problems.append(f"the tag {expected} is not the package's version {version}")
    if expected is not None:
        problems += check_changelog(version)
    with tempfile.TemporaryDirectory(prefix="ci-evals-release-") as work:
        problems += check_installed(wheel, Path(work), version)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=".ci/release.py", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="keep the wheel and sdist here (default: none)")
    parser.add_argument("--expect-version", help="the tag being released (v1.2.3 or 1.2.3)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="ci-evals-dist-") as scratch:
            out = args.out.resolve() if args.out else Path(scratch)
            if args.out and args.out.exists() and any(args.out.iterdir()):
                raise ReleaseError(f"{args.out}: not empty; give an empty or new folder")
            problems = release_check(out, args.expect_version)
    except ReleaseError as error:
        problems = [str(error)]
    except KeyboardInterrupt:
        return 130
    for problem in problems:
        print(f"release: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"release: OK in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
