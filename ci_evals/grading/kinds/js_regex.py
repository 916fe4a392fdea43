"""JavaScript regular expressions (`new RegExp(pattern, flags)`) matched with Python's `re`.

`claude plugin eval` cases write their `regex` graders' `pattern` and
`input_match` for JavaScript. A pattern is translated once, at load, into a
Python pattern that matches the same strings; a construct whose meaning
differs between the two engines and cannot be translated exactly is refused
with one line naming it, never matched differently. Translated: line
terminators and `$`, the ASCII classes (`\\d \\w \\b \\s`), named groups and the
escapes and class syntax Python reads otherwise, and, without `u`/`v`, UTF-16
code units (text and pattern split into surrogate pairs). Refused:
backreferences, octal escapes, `\\p{...}`, letter escapes Python reads otherwise,
Python-only groups, possessive quantifiers, escaped surrogates, `\\w`/`\\b` under
`i` with `u`/`v`, `v`'s set operations, and what `re` cannot compile. The full
lists: docs/plugin-evals.md (*JavaScript patterns*).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = frozenset("dgimsuvy")
_TERMINATORS = "\\n\\r\\u2028\\u2029"
_DOT = f"[^{_TERMINATORS}]"
_WORD = "A-Za-z0-9_"
# JavaScript's WhiteSpace and LineTerminator code points (ECMA-262, 22.2.2.9).
_SPACE = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_CLASS_ESCAPES = {
    "d": "0-9",
    "w": _WORD,
    "s": _SPACE,
}
_NEGATED = {"D": "d", "W": "w", "S": "s"}
# Escapes that mean the same character in both engines.
_SAME_CHAR = {"n": "\\n", "r": "\\r", "t": "\\t", "v": "\\x0b", "f": "\\x0c"}
_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
_FOLD_DIFFERS = frozenset("\u017f\u212a\u0130\u0131")
_FOLD_DIFFERS_UNICODE = frozenset("\u0130\u0131")
_GROUP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class JsRegexError(ValueError):
    """The pattern cannot be matched as JavaScript would match it: why, in one phrase."""


@dataclass(frozen=True)
class JsRegex:
    """A JavaScript pattern and flags, and the Python pattern that matches the same."""

    source: str
    flags: str
    python: re.Pattern[str] = field(compare=False, repr=False)

    @property
    def unicode(self) -> bool:
        return "u" in self.flags or "v" in self.flags

    @property
    def sticky(self) -> bool:
        return "y" in self.flags

    def _text(self, text: str) -> str:
        if "i" in self.flags:
            # Python's IGNORECASE matches these with ASCII letters; JavaScript's `i`
            # does not (with u/v it does for U+017F and U+212A only).
            differ = _FOLD_DIFFERS_UNICODE if self.unicode else _FOLD_DIFFERS
            odd = next((c for c in text if c in differ), None)
            if odd is not None:
                raise JsRegexError(
                    f"the text holds U+{ord(odd):04X}, which flag i matches with an ASCII "
                    "letter in Python's re but not in JavaScript"
                )
        return text if self.unicode else code_units(text)

    def test(self, text: str) -> bool:
        """`RegExp.prototype.test` on a fresh RegExp (lastIndex 0)."""
        subject = self._text(text)
        found = self.python.match(subject) if self.sticky else self.python.search(subject)
        return found is not None

    def count(self, text: str) -> int:
        """`text.match(new RegExp(pattern, flags + "g"))?.length ?? 0`: JavaScript's
        global match, which steps one character past an empty match."""
        subject = self._text(text)
        count, position = 0, 0
        while position <= len(subject):
            found = (
                self.python.match(subject, position)
                if self.sticky
                else self.python.search(subject, position)
            )
            if found is None:
                break
            count += 1
            position = found.end() + (1 if found.end() == found.start() else 0)
        return count


def code_units(text: str) -> str:
    """`text` as JavaScript's non-Unicode RegExp sees it: a character outside the BMP
    as its two UTF-16 surrogates."""
    if all(ord(c) < 0x10000 for c in text):
        return text
    out = []
    for char in text:
        point = ord(char)
        if point < 0x10000:
            out.append(char)
        else:
            point -= 0x10000
            out.append(chr(0xD800 + (point >> 10)) + chr(0xDC00 + (point & 0x3FF)))
    return "".join(out)


def compile_js(pattern: str, flags: str = "") -> JsRegex:
    """`new RegExp(pattern, flags)` as a `JsRegex`; `JsRegexError` says what cannot be."""
    bad = sorted(set(flags) - FLAGS)
    if bad:
        raise JsRegexError(f"unknown flag {bad[0]!r} (JavaScript's are d g i m s u v y)")
    if len(set(flags)) != len(flags):
        raise JsRegexError("a flag is given twice (JavaScript refuses the pattern)")
    if "u" in flags and "v" in flags:
        raise JsRegexError("flags u and v together (JavaScript refuses the pattern)")
    python = _Translator(pattern, flags).translate()
    options = re.IGNORECASE if "i" in flags else 0
    try:
        compiled = re.compile(python, options)
    except re.error as exc:
        raise JsRegexError(f"Python's re cannot match it the same way: {exc.msg}") from None
    return JsRegex(source=pattern, flags=flags, python=compiled)


class _Translator:
    def __init__(self, pattern: str, flags: str) -> None:
        self.pattern = pattern
        self.unicode = "u" in flags or "v" in flags
        self.sets = "v" in flags
        self.multiline = "m" in flags
        self.dotall = "s" in flags
        self.ignorecase = "i" in flags
        self.pos = 0
        self.out: list[str] = []

    def fail(self, what: str) -> JsRegexError:
        return JsRegexError(f"{what} at offset {self.pos}")

    def translate(self) -> str:
        while self.pos < len(self.pattern):
            self.out.append(self._token(self.pattern[self.pos]))
        return "".join(self.out)

    def _token(self, c: str) -> str:
        opener = {"\\": self._escape, "[": self._class, "(": self._open_group, "{": self._brace}
        if c in opener:
            return opener[c]()
        self.pos += 1
        if c in "*+?":
            return c + self._after_quantifier()
        if c in "}]":
            if self.unicode:
                raise self.fail(f"a lone {c!r} (JavaScript refuses it with u or v)")
            return "\\" + c
        return self._plain(c)

    def _plain(self, c: str) -> str:
        if c in ")|":
            return c
        if c == ".":
            return "[\\s\\S]" if self.dotall else _DOT
        if c == "^":
            return f"(?<![^{_TERMINATORS}])" if self.multiline else "\\A"
        if c == "$":
            return f"(?![^{_TERMINATORS}])" if self.multiline else "\\Z"
        text = c if self.unicode else code_units(c)
        return "".join(re.escape(u) if not u.isalnum() else u for u in text)

    def _after_quantifier(self) -> str:
        """A lazy `?` after a quantifier; a possessive `+` is refused."""
        p = self.pattern
        if p.startswith("?", self.pos):
            self.pos += 1
            return "?"
        if p.startswith("+", self.pos):
            raise self.fail("a possessive quantifier (JavaScript has none: it refuses the pattern)")
        return ""

    def _brace(self) -> str:
        found = _QUANTIFIER.match(self.pattern, self.pos)
        if found is None:
            if self.unicode:
                raise self.fail("a '{' that starts no quantifier (JavaScript refuses it with u)")
            self.pos += 1
            return "\\{"  # Annex B: a literal brace; Python would read `{,3}` as a quantifier
        self.pos = found.end()
        return found.group(0) + self._after_quantifier()

    def _open_group(self) -> str:
        p = self.pattern
        rest = p[self.pos + 1 :]
        if not rest.startswith("?"):
            self.pos += 1
            return "("
        for head in ("?:", "?=", "?!", "?<=", "?<!"):
            if rest.startswith(head):
                self.pos += 1 + len(head)
                return "(" + head
        if rest.startswith("?<"):
            end = rest.find(">")
            name = rest[2:end] if end > 0 else ""
            if not _GROUP_NAME.fullmatch(name):
                raise self.fail(
                    f"group name {name!r} (only ASCII letters, digits and '_' translate)"
                )
            self.pos += 1 + end + 1
            return f"(?P<{name}>"
        shown = "(" + rest[:3]
        raise self.fail(
            f"{shown!r}: a group JavaScript does not have (or reads otherwise): "
            "use (?:, (?=, (?!, (?<=, (?<! or (?<name>"
        )

    def _escape(self, *, in_class: bool = False) -> str:
        p = self.pattern
        if self.pos + 1 >= len(p):
            raise self.fail("a '\\' at the end of the pattern")
        c = p[self.pos + 1]
        self.pos += 2
        if c in _SAME_CHAR:
            return _SAME_CHAR[c]
        if c in "dwsDWSbB":
            return self._shorthand(c, in_class=in_class)
        if c.isdigit() or c == "k":
            return self._numbered(c)
        if c in "xuc":
            return self._code(c)
        if c in "pP":
            raise self.fail(f"\\{c}{{...}}: Unicode properties (Python's re has none)")
        if c.isalnum() or c == "_":
            raise self.fail(
                f"\\{c}: JavaScript reads it as {c!r} (or refuses it with u), Python's re "
                "otherwise; write the character itself"
            )
        if c == "-" and not in_class and self.unicode:
            raise self.fail("\\- outside a class (JavaScript refuses it with u)")
        return re.escape(c)

    def _shorthand(self, c: str, *, in_class: bool) -> str:
        """`\\d \\w \\s \\b` and their negations, as JavaScript's ASCII (and its spaces)."""
        if c in "wWbB" and self.ignorecase and self.unicode and not (in_class and c in "bB"):
            raise self.fail(f"\\{c} with i and u/v (JavaScript adds U+017F and U+212A)")
        if in_class:
            if c == "b":
                return "\\x08"
            if c in _NEGATED or c == "B":
                raise self.fail(f"\\{c} inside a class (write the class out)")
            return _CLASS_ESCAPES[c]
        if c in "bB":
            w = f"[{_WORD}]"
            if c == "b":
                return f"(?:(?<={w})(?!{w})|(?<!{w})(?={w}))"
            return f"(?:(?<={w})(?={w})|(?<!{w})(?!{w}))"
        if c in _NEGATED:
            return f"[^{_CLASS_ESCAPES[_NEGATED[c]]}]"
        return f"[{_CLASS_ESCAPES[c]}]"

    def _numbered(self, c: str) -> str:
        if c == "0" and not self.pattern[self.pos : self.pos + 1].isdigit():
            return "\\x00"
        if c == "0":
            raise self.fail("an octal escape (its meaning depends on the flags)")
        if c == "k":
            raise self.fail("\\k<name>: a backreference (see \\1)")
        raise self.fail(
            f"\\{c}: a backreference (JavaScript matches a group that did not take part "
            "as empty, Python fails the match)"
        )

    def _code(self, c: str) -> str:
        p = self.pattern
        if c == "u":
            return self._unicode_escape()
        if c == "x":
            hexa = p[self.pos : self.pos + 2]
            if not re.fullmatch(r"[0-9A-Fa-f]{2}", hexa):
                raise self.fail("\\x without two hex digits")
            self.pos += 2
            return "\\x" + hexa
        letter = p[self.pos : self.pos + 1]
        if not (letter.isascii() and letter.isalpha()):
            raise self.fail("\\c without a letter")
        self.pos += 1
        return f"\\x{ord(letter.upper()) % 32:02x}"

    def _unicode_escape(self) -> str:
        p = self.pattern
        if p.startswith("{", self.pos):
            if not self.unicode:
                raise self.fail("\\u{...} without u or v (JavaScript reads it as 'u' repeated)")
            end = p.find("}", self.pos)
            digits = p[self.pos + 1 : end] if end > 0 else ""
            if not re.fullmatch(r"[0-9A-Fa-f]{1,6}", digits) or int(digits, 16) > 0x10FFFF:
                raise self.fail("\\u{...} is no code point")
            self.pos = end + 1
            point = int(digits, 16)
        else:
            digits = p[self.pos : self.pos + 4]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise self.fail("\\u without four hex digits")
            self.pos += 4
            point = int(digits, 16)
        if 0xD800 <= point <= 0xDFFF:
            raise self.fail("an escaped surrogate (write the character itself)")
        if point >= 0x10000:
            return f"\\U{point:08x}"
        return f"\\u{point:04x}"

    def _class(self) -> str:
        p = self.pattern
        start = self.pos
        self.pos += 1
        negated = p.startswith("^", self.pos)
        if negated:
            self.pos += 1
        if p.startswith("]", self.pos):  # `[]` never matches, `[^]` matches anything
            self.pos += 1
            return "[\\s\\S]" if negated else "(?!)"
        parts: list[str] = []
        while not p.startswith("]", self.pos):
            if self.pos >= len(p):
                self.pos = start
                raise self.fail("an unterminated class")
            parts.append(self._class_member(parts))
        self.pos += 1
        return "[" + ("^" if negated else "") + "".join(parts) + "]"

    def _class_member(self, parts: list[str]) -> str:
        p, c = self.pattern, self.pattern[self.pos]
        if c == "\\":
            if self.sets and p.startswith("\\q", self.pos):
                raise self.fail("\\q{...} of flag v (Python's re has no string classes)")
            return self._escape(in_class=True)
        if self.sets and (c == "[" or p.startswith(("&&", "--"), self.pos)):
            raise self.fail("a set operation or nested class of flag v (Python has none)")
        if p.startswith(("&&", "--", "||", "~~"), self.pos):
            self.pos += 2
            return re.escape(c) * 2  # Python reserves these for set operations
        self.pos += 1
        if c == "-":
            return "\\-" if not parts or p.startswith("]", self.pos) else "-"
        if c in "[^":
            return "\\" + c
        units = c if self.unicode else code_units(c)
        if len(units) > 1 and p.startswith("-", self.pos):
            raise self.fail("a range from a character outside the BMP without u")
        return units
