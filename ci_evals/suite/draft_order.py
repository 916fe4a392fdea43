"""Whether a plugin's commands chain, for `init`'s draft (docs/onboarding.md).

The rule, read from the command files alone: command B *reads* command A's
output when B's file names a file A's file says it writes (a path such as
`research/company.md` on a line of A's with write, create, save, output or
produce), or, for a family of files (`lab/chapters/<NN>-<slug>.md`), names
their folder (`lab/chapters/`). Paths of the plugin's own files (templates, agents,
`${CLAUDE_PLUGIN_ROOT}/...`) are not outputs. One command naming another
(`/plugin:A`, "run A first") is no dependency: a `help` command names them
all, and a command suggests the next one it does not read from. Commands
that chain become phases, ordered so a writer comes before its readers
(`order`); commands none of which reads another are independent. Pure.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

_EXTENSIONS = "md|json|ya?ml|txt|csv|html|xml|toml|py|js|ts|sh"
# A relative path with a known extension, not the tail of a longer path or variable.
_PATH = re.compile(rf"(?<![\w/.$}}{{-])((?:[\w.-]+/)*[\w-]+\.(?:{_EXTENSIONS}))(?![\w/-])")
# A family of files in one folder: a path whose last part is a placeholder or a
# glob (`lab/chapters/<NN>-<slug>.md`, `notes/{topic}.md`, `lab/chapters/*.md`).
# A command that writes such a family is read by one that names its folder.
_FAMILY = re.compile(r"(?<![\w/.$}{-])((?:[\w.-]+/)+)[^\s/`'\"()]*[<{*][^\s`'\"()]*")
_WRITES = re.compile(
    r"\b(?:writ(?:e|es|ing|ten)|creat(?:e|es|ing)|sav(?:e|es|ing)|outputs?|produc(?:e|es))\b",
    re.IGNORECASE,
)

_EXHAUSTIVE = 7  # up to 7! = 5040 orders, a few ms


@dataclass(frozen=True)
class Reading:
    reader: str  # the command that reads
    writer: str  # the command whose output it reads
    via: str  # the file it reads


def readings(texts: Mapping[str, str], plugin_files: Collection[str]) -> list[Reading]:
    """Every (reader, writer) pair under the rule above, one reason each."""
    own = {*plugin_files, *(path.rsplit("/", 1)[-1] for path in plugin_files)}
    writes = {command: _written(text, own) for command, text in texts.items()}
    folders = {command: _written_folders(text, own) for command, text in texts.items()}
    found = []
    for reader, text in sorted(texts.items()):
        named = set(_PATH.findall(text))
        for writer in sorted(texts):
            if writer == reader:
                continue
            files = sorted(named & writes[writer])
            files += sorted(f for f in folders[writer] if _names_folder(text, f))
            if files:
                found.append(Reading(reader, writer, files[0]))
    return found


def order(commands: Sequence[str], found: Sequence[Reading]) -> list[str]:
    """The commands with each writer before its readers as far as they allow: the
    order whose readers come before their writers least, ties by name. A reader
    that reads n commands weighs 1/n per writer: a command listing the whole
    pipeline (its files, its commands) says less about its own place than one
    that reads a single writer."""
    reads: dict[str, set[str]] = {}
    for reading in found:
        reads.setdefault(reading.reader, set()).add(reading.writer)
    weight = {
        (writer, reader): Fraction(1, len(writers))
        for reader, writers in reads.items()
        for writer in writers
    }
    names = sorted(commands)
    if len(names) > _EXHAUSTIVE:  # too many orders to try: writers first, greedily
        done: list[str] = []
        while len(done) < len(names):
            left = [c for c in names if c not in done]
            done.append(min(left, key=lambda c: sum(weight.get((w, c), 0) for w in left)))
        return done

    def backward(candidate: tuple[str, ...]) -> tuple[Fraction, tuple[str, ...]]:
        at = {command: i for i, command in enumerate(candidate)}
        late = sum((w for (a, b), w in weight.items() if at[a] > at[b]), Fraction(0))
        return late, candidate

    orders: list[tuple[str, ...]] = list(itertools.permutations(names))
    best = min(orders, key=backward)
    return list(best)


def _written_folders(text: str, own: Collection[str]) -> set[str]:
    """The folders of the file families `text` says it writes (not the plugin's own)."""
    return {
        folder
        for line in text.splitlines()
        if _WRITES.search(line)
        for folder in _FAMILY.findall(line)
        if folder.rstrip("/") not in own and not any(p.startswith(folder) for p in own)
    }


def _names_folder(text: str, folder: str) -> bool:
    return re.search(rf"(?<![\w/.$}}{{-]){re.escape(folder)}", text) is not None


def _written(text: str, own: Collection[str]) -> set[str]:
    return {
        path
        for line in text.splitlines()
        if _WRITES.search(line)
        for path in _PATH.findall(line)
        if path not in own
    }
