"""The GitHub workflow `init` drafts: `.github/workflows/evals.yml` running the action.

The job is the README's (*In CI*): checkout with full history, then the
ci-evals action pinned to a full commit SHA — the one this ci-evals was
installed from when that is known (`pip install git+https://github.com/O/N@SHA`,
or a clone of a GitHub repository), else `init --action OWNER/NAME@SHA`, else a
placeholder `init` says to replace. Tags move; a SHA does not, so nothing else
is accepted as a pin. A suite outside the repository's top is named to the
action (`suite:`, `stage-map:`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ci_evals import git
from ci_evals.errors import UserError

WORKFLOW = ".github/workflows/evals.yml"
PLACEHOLDER = "your-org/ci-evals@FULL_COMMIT_SHA"
_PIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}@[0-9a-f]{40}")
_GITHUB = re.compile(
    r"(?:https://(?:[^@/]+@)?github\.com/|ssh://git@github\.com/|git@github\.com:)"
    r"([A-Za-z0-9-]+/[A-Za-z0-9._-]+?)(?:\.git)?/?"
)
# The checkout the README pins (actions/checkout v7.0.1).
CHECKOUT = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1"


@dataclass(frozen=True)
class ActionPin:
    uses: str  # OWNER/NAME@SHA, or PLACEHOLDER
    source: str  # how it was found, for the line init prints

    @property
    def placeholder(self) -> bool:
        return self.uses == PLACEHOLDER


def action_pin(given: str | None) -> ActionPin:
    """`--action` when given (a full commit SHA, else a one-line error), else where
    this ci-evals was installed from, else the placeholder."""
    if given is not None:
        if not _PIN.fullmatch(given):
            raise UserError(
                f"{given!r} is not OWNER/NAME@SHA with a full 40-character commit SHA",
                field="--action",
                hint="a tag or branch can move under you; pin the commit "
                "(git ls-remote https://github.com/OWNER/NAME TAG)",
            )
        return ActionPin(given, "--action")
    found = _installed_from()
    if found is not None:
        return found
    return ActionPin(PLACEHOLDER, "")


def _installed_from() -> ActionPin | None:
    """OWNER/NAME@SHA of the GitHub repository and commit this ci-evals came from."""
    direct = _direct_url()
    if direct is None:
        return None
    url = str(direct["url"])
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict):  # pip install git+URL@REF: the commit pip resolved
        slug, commit = github_slug(url), vcs.get("commit_id")
        if vcs.get("vcs") != "git" or slug is None or not isinstance(commit, str):
            return None
        found = f"{slug}@{commit}"
        return ActionPin(found, f"the commit ci-evals was installed from ({url})")
    parts = urlsplit(url)
    clone = Path(unquote(parts.path))
    if parts.scheme != "file" or not (clone / "action.yml").is_file():
        return None
    # Installed from a clone (pip install -e .): its commit, if its origin is GitHub.
    remote = git.run(clone, "remote", "get-url", "origin", check=False)
    slug = github_slug(remote.stdout.decode("utf-8", "replace").strip())
    commit = git.rev_parse(clone, "HEAD")
    if slug is None or commit is None:
        return None
    return ActionPin(f"{slug}@{commit}", f"the commit checked out in {clone}")


def _direct_url() -> dict[str, object] | None:
    """The installed distribution's direct_url.json (PEP 610), when it has a URL."""
    try:
        text = metadata.distribution("ci-evals").read_text("direct_url.json")
        direct = json.loads(text or "null")
    except (metadata.PackageNotFoundError, json.JSONDecodeError):
        return None
    if not isinstance(direct, dict) or not isinstance(direct.get("url"), str):
        return None
    return direct


def github_slug(url: str) -> str | None:
    """OWNER/NAME of a GitHub repository URL (https, ssh, pip's git+https), or None."""
    bare = re.sub(r"@[^/@:]+$", "", url.removeprefix("git+"))  # pip's `URL@REF`
    match = _GITHUB.fullmatch(bare)
    return match[1] if match else None


def render_workflow(pin: ActionPin, *, suite: str | None, stage_map: str | None) -> str:
    """The workflow file: the README's job, `with:` naming a suite not at the top."""
    with_lines = ['          anthropic-api-key: "${{ secrets.ANTHROPIC_API_KEY }}"']
    if suite is not None:
        with_lines.append(f"          suite: {json.dumps(suite)}")
    if stage_map is not None:
        with_lines.append(f"          stage-map: {json.dumps(stage_map)}")
    pinned = (
        "# REPLACE: the repository you host or mirror ci-evals in, at a full commit SHA"
        if pin.placeholder
        else "# pinned: a full commit SHA (a tag can move)"
    )
    with_block = "\n".join(with_lines)
    return f"""\
# Drafted by `ci-evals init`: on every pull request, run the eval stages the change
# affects and report them (step summary, JUnit, a sticky comment), docs/github.md.
# With no ANTHROPIC_API_KEY secret (a fork's pull request) pass `model: stub:PATH`
# for a wiring check; `isolation:` says where the agent runs (bwrap by default,
# which the action installs and allows on GitHub's Ubuntu runners).
name: evals
on: [pull_request]
permissions: {{}}
concurrency: # a newer push to the pull request cancels the run of the older one
  group: evals-${{{{ github.ref }}}}
  cancel-in-progress: true
jobs:
  evals:
    name: evals # a required check is matched by name
    runs-on: ubuntu-24.04
    permissions: {{ contents: read, pull-requests: write }}   # write: only for the comment
    steps:
      - uses: {CHECKOUT}
        with: {{ fetch-depth: 0, persist-credentials: false }}
      - uses: {pin.uses}   {pinned}
        with:
{with_block}
"""


def workflows_running_ci_evals(top: Path) -> list[str]:
    """The repository's workflow files that already use the action or run ci-evals
    (POSIX, relative to `top`): one of them is the user's, and `init` drafts none."""
    folder = top / ".github" / "workflows"
    found = []
    for path in sorted(folder.glob("*.y*ml")) if folder.is_dir() else []:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "ci-evals" in text:
            found.append(path.relative_to(top).as_posix())
    return found
