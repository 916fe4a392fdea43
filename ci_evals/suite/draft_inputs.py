"""A plausible example value for a command's arguments, from its `argument-hint`.

The value goes into the drafted scenario, which a stage then runs as is: a
literal hint (`[project-name]`) would be passed to the command as the project's
name. So the hint's first placeholder is read as a kind of thing (a company, a
file, a number) and given a value of that kind; a literal choice the hint offers
(`[slug|all]`: `all`) is taken as it stands. Pure.
"""

from __future__ import annotations

import re

# A word of the placeholder -> a value of that kind (first match wins, in order).
_KINDS: tuple[tuple[str, str], ...] = (
    ("company", "Acme Robotics"),
    ("product", "Acme Arm"),
    ("project", "acme-app"),
    ("audience", "new developers"),
    ("url", "https://example.com"),
    ("branch", "main"),
    ("pr", "1"),
    ("issue", "1"),
    ("number", "3"),
    ("count", "3"),
    ("file", "README.md"),
    ("path", "README.md"),
    ("dir", "src"),
    ("folder", "src"),
    ("slug", "getting-started"),
    ("name", "acme"),
    ("message", "Fix the typo in the README"),
    ("feature", "add a --verbose flag that prints each step"),
    ("task", "add a --verbose flag that prints each step"),
    ("description", "add a --verbose flag that prints each step"),
    ("question", "How is the configuration loaded?"),
    ("topic", "error handling"),
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_LITERAL = re.compile(r"[a-z]{2,10}")


def example_value(hint: str | None, command: str) -> str:
    """`[company-name]` -> `Acme Robotics`; `[chapter-slug|all]` -> `all`;
    `The feature to build (optional)` -> a feature request; no hint, or nothing
    recognised: `example-<placeholder>` (or the command's name)."""
    hint = hint or ""
    placeholders = [
        w.strip("[]<>(){}\"'")
        for w in hint.split()
        if not w.lstrip("[<(").startswith("-")  # a flag is optional: leave it out
    ]
    placeholders = [w for w in placeholders if w and w != "..."]
    if not placeholders:
        return command.replace(":", "-")
    first = placeholders[0]
    for choice in first.split("|")[1:]:
        if _LITERAL.fullmatch(choice) and _kind(choice) is None:
            return choice  # a value the hint itself offers
    # A hint without brackets or angles is a sentence: any of its words may say the kind.
    sentence = not any(c in hint for c in "[<")
    found = _kind(" ".join(placeholders) if sentence else first)
    return found if found is not None else f"example-{first.split('|')[0]}"


def _kind(text: str) -> str | None:
    words = {w.lower() for w in _WORD.findall(text.replace("_", " ").replace("-", " "))}
    for word, value in _KINDS:
        if word in words or f"{word}s" in words:
            return value
    return None
