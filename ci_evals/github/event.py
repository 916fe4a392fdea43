"""BASE and HEAD from a GitHub Actions event, when `compute-stage` gets no BASE.

The payload file (`$GITHUB_EVENT_PATH`) says what the run is about: for a pull
request, GitHub's synthetic merge commit's first parent is the exact base (the
merge adds exactly the PR's changes on top of it; one `--deepen=1` fetch shows
it in a depth-1 clone, else `pull_request.base.sha`); for a push, `before` (a
push that rewrote history is marked so the diff also covers the two tips,
`selection.diff.resolve`); for a merge group, its `base_sha`.

HEAD is always the checkout (`--head`, default `HEAD`): that is what gets
evaluated. When it is not the commit the event is about, the answer would be
about a different change, so that is an error (exit 2), not a guess. Fail
closed: a payload file missing or not a JSON object is a `UserError`; an event
without a base (`workflow_dispatch`, `schedule`, ...) or a payload without a
usable base SHA gives base None, `base-missing`, and stage 1. Each event:
docs/compute-stage.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from ci_evals import git
from ci_evals.errors import UserError
from ci_evals.github.actions import ActionsEnv

PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class EventRange:
    """The range an event names. `base` None: no usable base (`base-missing`)."""

    event: str
    base: str | None
    head: str  # the revision to diff to: the checkout as given (`HEAD`)
    detail: str  # for a person: where base and head came from
    # A push that may have rewritten history: `forced` in the payload, or (checked
    # by `selection.diff.resolve`) `before` not an ancestor of `after`.
    rewritable: bool = False
    forced: bool = False


def range_from_event(
    repo: Path, env: ActionsEnv, head: str = "HEAD", *, deepen: bool = False
) -> EventRange:
    """BASE/HEAD for the current Actions run (see the module docstring).

    `deepen`: in a shallow clone whose HEAD has its parents cut off (checkout's
    default fetch-depth 1), fetch one more level to see the PR merge commit's parents.
    """
    event = env.event_name
    if not event:
        raise UserError(
            "no BASE given and GITHUB_EVENT_NAME is not set",
            field="BASE",
            hint="pass BASE (a SHA or ref) explicitly",
        )
    if event not in (*PULL_REQUEST_EVENTS, "push", "merge_group"):
        return EventRange(event, None, head, f"a {event!r} event names no base commit")
    if env.event_path is None:
        raise UserError(
            "no BASE given and GITHUB_EVENT_PATH is not set",
            field="BASE",
            hint="pass BASE explicitly",
        )
    payload = load_event(env.event_path, hint="pass BASE explicitly, or check GITHUB_EVENT_PATH")
    if event in PULL_REQUEST_EVENTS:
        return _pull_request(repo, env, payload, head, deepen)
    if event == "push":
        found = _simple(repo, event, payload, ("before",), ("after",), head=head)
        return replace(found, rewritable=True, forced=payload.get("forced") is True)
    return _simple(
        repo, event, payload, ("merge_group", "base_sha"), ("merge_group", "head_sha"), head=head
    )


def load_event(path: Path, *, hint: str | None = None) -> dict[str, object]:
    """The Actions event payload (`GITHUB_EVENT_PATH`) as a JSON object.

    A file that cannot be read or parsed (with `hint`), or that holds no JSON
    object: a one-line `UserError` naming it.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"cannot read the event payload: {exc}", file=path, hint=hint) from None
    if not isinstance(data, dict):
        raise UserError("the event payload is not a JSON object", file=path)
    return data


def _sha_at(payload: dict[str, object], keys: tuple[str, ...]) -> str | None:
    """The SHA at `payload[k1][k2]...`, or None when absent or not a SHA."""
    value: object = payload
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, str) and _SHA.fullmatch(value):
        return value
    return None


def _missing(event: str, keys: tuple[str, ...], head: str) -> EventRange:
    name = ".".join(keys)
    return EventRange(event, None, head, f"the {event} payload has no commit SHA at {name!r}")


def _checkout(repo: Path, head: str) -> str:
    sha = git.rev_parse(repo, head)
    if sha is None:
        raise UserError(
            f"HEAD revision {head!r} names no commit in this repository",
            field="--head",
            hint="check out the commit to evaluate (actions/checkout)",
        )
    return sha


def _pull_request(
    repo: Path, env: ActionsEnv, payload: dict[str, object], head: str, deepen: bool
) -> EventRange:
    event = env.event_name or "pull_request"
    base_keys = ("pull_request", "base", "sha")
    head_keys = ("pull_request", "head", "sha")
    base_sha = _sha_at(payload, base_keys)
    pr_head = _sha_at(payload, head_keys)
    if pr_head is None:
        return _missing(event, head_keys, head)
    checkout = _checkout(repo, head)
    parents = git.parents(repo, checkout)
    cut_off = not parents and checkout in git.shallow_commits(repo)
    if cut_off and deepen and git.deepen(repo, 1).returncode == 0:
        # fetch-depth 1 (checkout's default): one more level shows the parents.
        parents = git.parents(repo, checkout)
        cut_off = not parents
    if len(parents) == 2 and parents[1] == pr_head:
        detail = (
            f"{event}: HEAD {checkout[:12]} is the merge commit of the PR head; "
            f"BASE = its first parent {parents[0][:12]}"
        )
        return EventRange(event, parents[0], head, detail)
    if cut_off and checkout == env.sha:
        # GitHub's own commit for this run, parents not fetched: the payload's base.
        if base_sha is None:
            return _missing(event, base_keys, head)
        detail = (
            f"{event}: HEAD {checkout[:12]} is GITHUB_SHA but its parents are not fetched "
            "(fetch-depth: 2 makes this exact); BASE = pull_request.base.sha"
        )
        return EventRange(event, base_sha, head, detail)
    if checkout != pr_head:
        raise UserError(
            f"HEAD {checkout[:12]} is neither the pull request head {pr_head[:12]} "
            "nor GitHub's merge commit of it",
            field="--head",
            hint="check out the pull request (actions/checkout does by default), "
            "or pass BASE and --head explicitly",
        )
    if base_sha is None:
        return _missing(event, base_keys, head)
    return EventRange(event, base_sha, head, f"{event}: BASE = pull_request.base.sha")


def _simple(
    repo: Path,
    event: str,
    payload: dict[str, object],
    base_keys: tuple[str, ...],
    head_keys: tuple[str, ...],
    *,
    head: str,
) -> EventRange:
    base_sha = _sha_at(payload, base_keys)
    event_head = _sha_at(payload, head_keys)
    if event_head is None:
        return _missing(event, head_keys, head)
    checkout = _checkout(repo, head)
    if checkout != event_head:
        raise UserError(
            f"HEAD {checkout[:12]} is not the {event} event's commit {event_head[:12]} "
            f"({'.'.join(head_keys)})",
            field="--head",
            hint="check out the event's commit (actions/checkout does by default), "
            "or pass BASE and --head explicitly",
        )
    if base_sha is None:
        return _missing(event, base_keys, head)
    return EventRange(event, base_sha, head, f"{event}: BASE = {'.'.join(base_keys)}")
