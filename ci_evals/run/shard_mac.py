"""A shard's folder signed with the run's key, and checked by `merge`
(docs/scale-out.md, *Who can forge a verdict*).

`run --shard` with `CI_EVALS_SHARD_KEY` set lists every entry of its output
folder (each file's SHA-256, each link's target) and writes that list with an
HMAC-SHA256 over it as `shard.mac.json`; `merge` with the same key lists the
folder again and refuses a shard whose list or MAC differs, or that has none.

The key is taken out of the process environment before anything starts
(`take_key`), so no child inherits it — the agent's environment is an
allow-list anyway — nor does our `/proc/<pid>/environ` show it any more
(`environ_block`), and it is never written anywhere. Held, it is still a
credential: the caller's copy of the environment keeps its name, so the
sandbox's choice refuses to run anything unisolated (`isolation.choose`). What is signed uses a key
derived for one workflow run (`GITHUB_REPOSITORY`, `GITHUB_RUN_ID`): a shard
signed in another run of the same commit does not verify.
"""

from __future__ import annotations

import hmac
import json
import os
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.fs.atomic import write_atomic
from ci_evals.fs.digest import file_sha256
from ci_evals.fs.walk import walk
from ci_evals.run import environ_block

KEY_ENV = "CI_EVALS_SHARD_KEY"
MAC_FILE = "shard.mac.json"
MIN_KEY = 32  # characters: a random secret, not a password
_MAX_MAC_FILE = 64 * 1024 * 1024  # a listing of a very large shard; no more is read
_VERSION = 1
_HEX_MAC = re.compile("[0-9a-f]{64}")


@dataclass(frozen=True)
class ShardKey:
    """The key a workflow run's shards are signed with (never shown)."""

    secret: bytes = field(repr=False)
    scope: str  # the workflow run it is derived for ("" outside Actions)

    def mac(self, listing: bytes) -> str:
        run_key = hmac.new(self.secret, b"ci-evals shard\0" + self.scope.encode(), "sha256")
        return hmac.new(run_key.digest(), listing, "sha256").hexdigest()


def take_key(environ: MutableMapping[str, str]) -> ShardKey | None:
    """The key from `CI_EVALS_SHARD_KEY`, removed from `environ` (the process's own, so
    no child gets it) and wiped from the environment block `/proc/<our pid>/environ`
    shows; None when unset or empty (a fork's run gets no secrets)."""
    value = environ.pop(KEY_ENV, "")
    if not value:
        return None
    os.environ.pop(KEY_ENV, None)  # when `environ` was a copy, the process's own too
    try:
        environ_block.hide(KEY_ENV)
    except OSError as exc:
        raise UserError(
            f"cannot wipe the key from this process's /proc environ ({exc}): any process "
            "of this user could read it there",
            field=KEY_ENV,
            hint="run ci-evals on Linux with /proc mounted, or without the key (unsigned)",
        ) from None
    if len(value) < MIN_KEY:
        raise UserError(
            f"the key is {len(value)} characters, fewer than {MIN_KEY}",
            field=KEY_ENV,
            hint="a random secret, e.g. `openssl rand -hex 32`",
        )
    scope = f"{environ.get('GITHUB_REPOSITORY', '')}/{environ.get('GITHUB_RUN_ID', '')}"
    return ShardKey(value.encode(), scope)


def without_key(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` less the key: what a run hands on (its endpoint, its agents' allow-list)."""
    return {name: value for name, value in environ.items() if name != KEY_ENV}


def sign(folder: Path, key: ShardKey) -> None:
    """Write `folder`'s listing and its MAC as `folder/shard.mac.json`."""
    entries = _listing(folder)
    record = {"version": _VERSION, "entries": entries, "mac": key.mac(_canonical(entries))}
    write_atomic(folder / MAC_FILE, (json.dumps(record, indent=1) + "\n").encode())


def verify(folder: Path, key: ShardKey) -> None:
    """`UserError` naming the shard unless `folder` is exactly what was signed with `key`."""
    file = folder / MAC_FILE
    try:  # a regular file, no link, capped: a FIFO or /dev/zero must not stall the merge
        record = json_input.load_file(file, _MAX_MAC_FILE, what="shard MAC")
    except UserError as exc:
        raise UserError(
            f"no valid shard MAC ({exc.message})",
            file=file,
            hint=f"{KEY_ENV} is set: merge only shards `run --shard` signed with it",
        ) from None
    if not isinstance(record, dict) or record.get("version") != _VERSION:
        raise UserError("not a shard MAC this ci-evals reads", file=file, field="version")
    mac = record.get("mac")
    # compare_digest takes ASCII text only (`"é"` was a TypeError): a MAC is 64 hex digits.
    if (
        not isinstance(mac, str)
        or not _HEX_MAC.fullmatch(mac)
        or not hmac.compare_digest(mac, key.mac(_canonical(record.get("entries"))))
    ):
        raise UserError(
            "the shard's MAC is not this run's key's: it was signed with another key or in "
            "another run, or its listing was edited",
            file=file,
            field="mac",
            hint=f"merge the shards of this workflow run, with the {KEY_ENV} they ran with",
        )
    now = _listing(folder)
    if record["entries"] != now:
        changed = _first_difference(record["entries"], now)
        raise UserError(
            f"the shard's folder is not what was signed: {changed}",
            file=file,
            field="entries",
            hint="a signed shard is merged as `run --shard` left it",
        )


def _listing(folder: Path) -> list[list[str]]:
    """[path, what] for every entry below `folder` but the MAC file: a file's SHA-256, a
    link's target, `dir` or `other`, sorted by path."""
    entries: list[list[str]] = []
    for rel, kind, entry in walk(folder):
        if rel == MAC_FILE:
            continue
        if kind == "file":
            what = "sha256:" + file_sha256(Path(entry.path))
        elif kind == "link":
            what = "link:" + os.readlink(entry.path)
        else:
            what = kind
        entries.append([rel, what])
    return sorted(entries)


def _canonical(entries: object) -> bytes:
    return json.dumps(entries, separators=(",", ":"), ensure_ascii=True).encode()


def _first_difference(signed: list[list[str]], now: list[list[str]]) -> str:
    was = {path: what for path, what in signed}
    found = {path: what for path, what in now}
    for path in sorted(was.keys() | found.keys()):
        if path not in found:
            return f"{path!r} is gone"
        if path not in was:
            return f"{path!r} was added"
        if was[path] != found[path]:
            return f"{path!r} changed"
    return "its listing differs"
