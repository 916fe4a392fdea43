"""The name rules active in one folder, and the regex groups that test many at once.

Every glob is "some folder condition" + "/" + NAME (see `folder_index`); a
`NameMatcher` holds the NAME parts that apply in a folder, indexed so that a
file costs dict look-ups on its name, plus at most one regex call
(`RegexGroup`) that reports every matching wildcard name at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Above this many regexes a group first tries one plain alternation (cheap "no").
_PREFILTER_AT = 8


class RegexGroup:
    """Regexes tested in ONE `re` call that reports every one that matches.

    Each regex sits in an empty-able lookahead with a capture group,
    `(?:(?=(R))|)`, so a single `match` at position 0 tries all of them and
    `groups()` says which matched. A regex that several globs share (the
    folder condition of `**/tests/test_1*`, `**/tests/test_2*`, ...) is tried
    once for all of them. Large groups first try a plain alternation,
    which answers the common "none of them" faster. Compiled on first use: a
    bucket no path reaches costs nothing.
    """

    __slots__ = ("_all", "_any", "_indices", "_regexes", "_slots", "depth")

    @property
    def regexes(self) -> tuple[str, ...]:
        """The distinct regexes, in the order they first appear."""
        return self._regexes

    def __init__(
        self, indices: Sequence[int], regexes: Sequence[str], depth: int | None = None
    ) -> None:
        self._indices = tuple(indices)
        distinct: dict[str, list[int]] = {}
        for index, regex in zip(self._indices, regexes, strict=True):
            distinct.setdefault(regex, []).append(index)
        self._regexes = tuple(distinct)
        # The globs each distinct regex reports (None: one per regex, as given).
        self._slots = (
            None if len(distinct) == len(self._indices) else [*map(tuple, distinct.values())]
        )
        self.depth = depth  # folder regexes: the only folder depth they can match (None: any)
        self._all: re.Pattern[str] | None = None
        self._any: re.Pattern[str] | None = None

    def _compile(self) -> re.Pattern[str]:
        regex = re.compile("".join(f"(?:(?=({r}))|)" for r in self._regexes), re.DOTALL)
        if regex.groups != len(self._regexes):  # pragma: no cover - pathspec changed
            raise ValueError("a glob regex has capture groups of its own")
        if len(self._regexes) > _PREFILTER_AT:
            self._any = re.compile("|".join(f"(?:{r})" for r in self._regexes), re.DOTALL)
        self._all = regex
        return regex

    @property
    def indices(self) -> tuple[int, ...]:
        """The glob indices this group reports, in its order."""
        return self._indices

    def find(self, text: str) -> list[int]:
        regex = self._all if self._all is not None else self._compile()
        if self._any is not None and self._any.match(text) is None:
            return []
        found = regex.match(text)
        assert found is not None  # every lookahead may match empty
        if self._slots is None:
            return [i for i, g in zip(self._indices, found.groups(), strict=True) if g is not None]
        # Ascending, the order folder groups are given in (as without shared regexes).
        return sorted(
            [
                i
                for slot, g in zip(self._slots, found.groups(), strict=True)
                if g is not None
                for i in slot
            ]
        )


@dataclass(frozen=True)
class NameRule:
    """The last segment of a glob: which names it matches, at which folders.

    Every glob is "some folder condition" + "/" + NAME: a path matches when
    the path itself, or one of its folders, is NAME inside a folder meeting the
    condition (that is how git applies a pattern to a path and its leading
    folders). Dir-only rules (`foo/`) apply to folders only.
    """

    index: int
    dir_only: bool
    literal: str | None  # `README.md`
    suffix: str | None  # `*.md` -> ".md"
    regex: str | None  # anything else, matched against the whole name


class NameMatcher:
    """The name rules active in one folder, indexed: dicts first, one regex call last."""

    __slots__ = (
        "everything",
        "ext",
        "folder_cache",
        "indices",
        "lengths",
        "literal",
        "regex_rules",
        "regexes",
        "suffix",
    )
    indices: tuple[int, ...]  # every rule's glob index, in order (a base's first)
    regex_rules: tuple[NameRule, ...]  # the wildcard rules, in the same order

    def __init__(
        self,
        rules: Sequence[NameRule],
        groups: Callable[[Sequence[NameRule]], RegexGroup],
        base: NameMatcher | None = None,
    ) -> None:
        """The matcher for `rules`, or for `base`'s rules followed by `rules`.

        Most folders' rules are a shared set (the `*.md`-style rules active
        everywhere) plus a few of their own: built on `base`, a matcher costs
        its own rules, not the shared ones again. The tables are copied, and
        their lists replaced, never changed: `base` stays as it was.
        """
        if base is None:
            self.literal: dict[str, list[int]] = {}
            self.ext: dict[str, list[int]] = {}  # `*.md`: one look-up of the name's extension
            self.suffix: dict[str, list[int]] = {}  # other suffixes (`*_test.py`, `*.tar.gz`)
            self.everything: list[int] = []
            regex_rules: tuple[NameRule, ...] = ()
            indices: tuple[int, ...] = ()
        else:
            self.literal, self.ext = dict(base.literal), dict(base.ext)
            self.suffix, self.everything = dict(base.suffix), list(base.everything)
            regex_rules = base.regex_rules
            indices = base.indices
        new_regex_rules: list[NameRule] = []
        for rule in rules:
            if rule.literal is not None:
                _added(self.literal, rule.literal, rule.index)
            elif rule.suffix == "":
                self.everything.append(rule.index)
            elif rule.suffix is not None:
                is_ext = rule.suffix.startswith(".") and rule.suffix.count(".") == 1
                _added(self.ext if is_ext else self.suffix, rule.suffix, rule.index)
            else:
                new_regex_rules.append(rule)
        self.lengths = tuple(sorted({len(key) for key in self.suffix}))
        self.regex_rules = (*regex_rules, *new_regex_rules) if new_regex_rules else regex_rules
        if base is not None and not new_regex_rules:
            self.regexes: RegexGroup | None = base.regexes
        else:  # (`groups` shares one group between all matchers with the same rules)
            self.regexes = groups(self.regex_rules) if self.regex_rules else None
        self.indices = indices + tuple([rule.index for rule in rules])
        # Folder names repeat (`src`, `tests` in every module): their answers are kept.
        self.folder_cache: dict[str, tuple[int, ...]] = {}

    def match_folder(self, name: str) -> tuple[int, ...]:
        """`match` for a folder name, cached."""
        found = self.folder_cache.get(name)
        if found is None:
            found = tuple(self.match(name))
            self.folder_cache[name] = found
        return found

    def match(self, name: str) -> list[int]:
        out = list(self.everything)
        hit = self.literal.get(name)
        if hit:
            out.extend(hit)
        dot = name.rfind(".")
        if dot != -1:
            hit = self.ext.get(name[dot:])
            if hit:
                out.extend(hit)
        if self.lengths or self.regexes is not None:
            out.extend(self.match_rest(name))
        return out

    def match_rest(self, name: str) -> list[int]:
        """The rules that are neither literal names nor extensions."""
        out: list[int] = []
        for length in self.lengths:
            hit = self.suffix.get(name[-length:])
            if hit:
                out.extend(hit)
        if self.regexes is not None:
            out.extend(self.regexes.find(name))
        return out


def _added(table: dict[str, list[int]], key: str, index: int) -> None:
    """Add `index` under `key`, replacing the list instead of changing it (it may be shared)."""
    table[key] = [*table.get(key, ()), index]
