"""Unpack a zip that came from elsewhere (a workflow artifact) without trusting it.

Every entry is checked before anything is written, and one bad entry refuses
the whole archive (a crafted entry is a reason to believe nothing in it):

- names: relative, `/`-separated, no `..`, `.` or empty part, no backslash, no
  drive letter, no NUL — so nothing lands outside the destination;
- kinds: plain files and folders only (no symbolic link — which a later entry
  could write through —, no device, no FIFO), not encrypted, stored or
  deflated (a corrupt stream is a refusal too, not zlib's error); no name
  that is a file in one entry and a folder in another (`a` and `a/b`);
- counts and sizes: at most `max_entries` entries and `max_bytes` unpacked in
  all, counted on the bytes actually written, not only on what the archive
  declares (a zip bomb declares little).

Files are created with `O_EXCL | O_NOFOLLOW` in a destination that must not
exist yet, so nothing already on disk is overwritten or followed.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ci_evals.errors import UserError

CHUNK = 1024 * 1024
_DRIVE = re.compile(r"[A-Za-z]:")
# What upload-artifact writes (deflate) and stored entries; others are refused by
# name before zipfile would raise NotImplementedError half-way through.
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_ENCRYPTED = 0x1
_UNSUPPORTED = 0x20 | 0x40  # compressed patched data, strong encryption
# What zipfile raises for a crafted or corrupt archive besides BadZipFile: a
# corrupt deflate stream (zlib.error), a cut-off one (EOFError), an offset
# that seeks before the start (ValueError), a flag it cannot honour
# (NotImplementedError, RuntimeError). Each is a refusal, never a traceback.
READ_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    OverflowError,
    NotImplementedError,
    RuntimeError,
)


@dataclass(frozen=True)
class ZipLimits:
    max_bytes: int = 1024 * 1024 * 1024  # unpacked, in all
    max_entries: int = 20_000


def _refuse(archive: Path, why: str) -> UserError:
    return UserError(
        f"refusing the artifact: {why}",
        file=archive,
        hint="an artifact ci-evals uploaded holds plain files only; this one was not made so",
    )


def _parts(archive: Path, info: zipfile.ZipInfo) -> tuple[str, ...]:
    name = info.filename
    shown = name.encode("unicode_escape").decode("ascii")[:200]
    body = name[:-1] if name.endswith("/") else name  # zipfile's is_dir() fails on ""
    parts = tuple(body.split("/"))
    if (
        not body
        or "\0" in name
        or "\\" in name
        or name.startswith("/")
        or _DRIVE.match(name)
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise _refuse(archive, f"entry {shown!r} would be written outside the folder")
    return parts


def check_entry(archive: Path, info: zipfile.ZipInfo) -> None:
    """Refuse an entry zipfile could not read as plain data: encrypted, patched, or
    compressed other than stored/deflate, or not a plain file or folder."""
    shown = info.filename.encode("unicode_escape").decode("ascii")[:200]
    mode = info.external_attr >> 16
    if info.flag_bits & _ENCRYPTED:
        raise _refuse(archive, f"entry {shown!r} is encrypted")
    if info.flag_bits & _UNSUPPORTED:
        raise _refuse(archive, f"entry {shown!r} has flags 0x{info.flag_bits:04x}")
    if info.compress_type not in _METHODS:
        raise _refuse(archive, f"entry {shown!r} uses compression method {info.compress_type}")
    kind = stat.S_IFMT(mode)
    if kind == stat.S_IFLNK:
        raise _refuse(archive, f"entry {shown!r} is a symbolic link")
    # 0: made on a system that records no Unix mode (what upload-artifact writes).
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise _refuse(archive, f"entry {shown!r} is not a plain file or folder")


def _plan(archive: Path, infos: list[zipfile.ZipInfo], limits: ZipLimits) -> None:
    if len(infos) > limits.max_entries:
        raise _refuse(archive, f"{len(infos)} entries, over the limit of {limits.max_entries}")
    declared = 0
    seen: set[tuple[str, ...]] = set()
    files: dict[tuple[str, ...], str] = {}
    folders: dict[tuple[str, ...], str] = {}  # every folder an entry needs, and who
    for info in infos:
        parts = _parts(archive, info)
        check_entry(archive, info)
        if parts in seen:
            raise _refuse(archive, f"entry {info.filename!r} appears twice")
        seen.add(parts)
        if not info.is_dir():
            files[parts] = info.filename
        for end in range(1, len(parts) + info.is_dir()):
            folders.setdefault(parts[:end], info.filename)
        declared += info.file_size
        if declared > limits.max_bytes:
            raise _refuse(archive, f"it unpacks to more than {limits.max_bytes} bytes")
    for parts, name in files.items():
        if parts in folders:
            raise _refuse(
                archive, f"entry {name!r} is a file, but {folders[parts]!r} needs it as a folder"
            )


def safe_extract(archive: Path, dest: Path, limits: ZipLimits | None = None) -> list[str]:
    """Unpack `archive` into `dest` (created; must not exist); the files written, relative.

    On any refusal (`UserError`) nothing is left behind: `dest` is removed.
    """
    limits = limits or ZipLimits()
    try:
        with zipfile.ZipFile(archive) as opened:
            infos = opened.infolist()
            _plan(archive, infos, limits)
            dest.mkdir(parents=True)
            try:
                return _write_all(archive, opened, infos, dest, limits)
            except BaseException:
                shutil.rmtree(dest, ignore_errors=True)
                raise
    except FileExistsError:
        raise UserError("the folder already exists", file=dest, hint="use a new folder") from None
    except READ_ERRORS as exc:
        raise _refuse(archive, f"not a readable zip file ({exc})") from None


def _write_all(
    archive: Path,
    opened: zipfile.ZipFile,
    infos: list[zipfile.ZipInfo],
    dest: Path,
    limits: ZipLimits,
) -> list[str]:
    written: list[str] = []
    total = 0
    for info in infos:
        parts = _parts(archive, info)
        target = dest.joinpath(*parts)
        try:
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError as exc:  # _plan refuses what it can foresee; this is the rest
            raise _refuse(archive, f"entry {info.filename!r} cannot be written: {exc}") from None
        with os.fdopen(fd, "wb") as out, opened.open(info) as source:
            while chunk := _read(archive, info, source):
                total += len(chunk)
                if total > limits.max_bytes:
                    raise _refuse(archive, f"it unpacks to more than {limits.max_bytes} bytes")
                out.write(chunk)
        written.append("/".join(parts))
    return written


def _read(archive: Path, info: zipfile.ZipInfo, source: IO[bytes]) -> bytes:
    """The next chunk; a corrupt stream (zlib's error, a cut-off end) is a refusal."""
    try:
        return source.read(CHUNK)
    except READ_ERRORS as exc:
        raise _refuse(archive, f"entry {info.filename!r} cannot be unpacked ({exc})") from None
