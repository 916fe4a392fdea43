"""What `ci-evals --version` prints: the version, and the commit when installed from git.

A wheel (from an index or a file) is its version: `ci-evals 0.1.0`. An install
from git (`pip install git+https://…@REV`, the trusted comment job's) adds the
commit pip checked out, recorded in the install's `direct_url.json` (PEP 610):
`ci-evals 0.1.0 (git 1a2b3c4d5e6f)`. A source checkout (an editable install,
`python -m ci_evals` from a clone) adds its HEAD, and says when the package
differs from it: `(git 1a2b3c4d5e6f, editable, uncommitted changes)`. Two
installs of one version from different commits are told apart that way.

Computed only when asked (`--version`): it runs git, which no other command
should pay for.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import ci_evals
from ci_evals import git

DISTRIBUTION = "ci-evals"
SHORT_SHA = 12


def version_line() -> str:
    """`ci-evals VERSION`, plus `(git SHA…)` when this package came from git."""
    origin = _checkout_origin() or _vcs_install_origin()
    suffix = f" ({origin})" if origin else ""
    return f"ci-evals {ci_evals.__version__}{suffix}"


def _package_dir() -> Path:
    return Path(ci_evals.__file__).resolve().parent


def _checkout_origin() -> str | None:
    """`git SHA, editable[, uncommitted changes]` when the package is imported from a git
    work tree holding this project (its pyproject.toml beside the package), else None."""
    root = _package_dir().parent
    if not (root / "pyproject.toml").is_file() or not (root / ".git").exists():
        return None
    commit = git.rev_parse(root, "HEAD")
    if commit is None:  # no commit yet, or no git on PATH
        return None
    dirty = git.has_changes(root, ["ci_evals", "pyproject.toml"])
    return f"git {commit[:SHORT_SHA]}, editable" + (", uncommitted changes" if dirty else "")


def _vcs_install_origin() -> str | None:
    """`git SHA` from the install's `direct_url.json` when pip installed this very package
    from a git URL, else None (a wheel, an sdist, an index: no commit to name)."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    # Another install of ci-evals may be on the path (a checkout run with PYTHONPATH):
    # its record says nothing about the package actually imported.
    installed = Path(str(dist.locate_file("ci_evals/__init__.py"))).resolve()
    if installed != _package_dir() / "__init__.py":
        return None
    try:
        record = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None
    vcs = record.get("vcs_info") if isinstance(record, dict) else None
    if not isinstance(vcs, dict) or vcs.get("vcs") != "git":
        return None
    commit = vcs.get("commit_id")
    return f"git {commit[:SHORT_SHA]}" if isinstance(commit, str) and commit else None
