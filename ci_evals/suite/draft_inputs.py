"""A plausible example value for a command's arguments: the command's own example,
else one made from its `argument-hint`.

The value goes into the drafted scenario, which a stage then runs as is: a
literal hint (`[project-name]`) would be passed to the command as the project's
name. So, in turn:

1. an invocation the command's own text shows (`/conductor:manage --list`,
   `/approve-review "LGTM"`), placeholders (`<x>`, `[x]`, `$1`) not taken;
2. the hint's own example (`[goal, e.g. 'tune an 8B model']`);
3. a literal choice the hint offers (`[slug|all]`: `all`), so the value is one
   the command accepts;
4. the hint's first placeholder read as a kind of thing (a company, a file, a
   number) and given a value of that kind (`<target path or description>`: a file);
5. a hint of optional flags alone (`[--resume]`): no arguments at all;
6. nothing known: `example-<placeholder>`, or without a hint a task sentence —
   never the command's own name, which no command takes as its argument. Pure.
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
    ("directory", "src"),
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
# Without a hint or an example: a task the command can take as free text.
NO_HINT = "a small example task on the files in this workspace"
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_LITERAL = re.compile(r"[a-z]{2,10}")
# A placeholder in brackets or angles, or a run of bare words between them.
_GROUP = re.compile(r"\[([^\]]*)\]|<([^>]*)>|([^\[<\s][^\[<]*)")
_EXAMPLE = re.compile(r"\be\.g\.,?\s*(.+)$")
# What marks a shown invocation's arguments as a template, not an example.
_PLACEHOLDER = re.compile(r"[<\[{$]|\.\.\.|\bARGS\b|\bARGUMENTS\b")


def example_value(hint: str | None, command: str) -> str:
    """The arguments to draft for `command` from its hint (2-6 above); the
    command's own example (1) is `shown_example`'s."""
    if hint is None:
        return _kind(command) or NO_HINT
    sentence = not any(c in hint for c in "[<")  # any of its words may say the kind
    groups = [next(g for g in m.groups() if g is not None) for m in _GROUP.finditer(hint)]
    groups = [g.strip() for g in groups if g.strip() and not g.strip().startswith("-")]
    if not groups:
        return ""  # optional flags only: the command runs bare
    first = groups[0]
    given = _EXAMPLE.search(first)
    if given is not None:
        return given.group(1).strip().strip("'\"`").strip()
    choices = [c.strip() for c in first.split("|")]
    offered = [c for c in choices[1:] if _LITERAL.fullmatch(c) and _kind(c) is None]
    found = offered[0] if offered else _kind(first if not sentence else hint)
    if found is not None:
        return found
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", choices[0].split()[0] if choices[0] else "").strip("-")
    return f"example-{name or 'value'}"


def shown_example(text: str, plugin: str, command: str) -> str | None:
    """The arguments of the first invocation of `command` the text shows with
    real arguments (`/plugin:cmd --list`, `` `/cmd "LGTM"` ``), a comment after
    `#` left out; None when it shows none."""
    prefix = rf"(?:{re.escape(plugin)}:)?" if plugin else ""
    call = re.compile(
        rf"(?:^|[\s`(])/{prefix}{re.escape(command)}[ \t]+"
        rf"(\"[^\"\n]*\"|'[^'\n]*'|[^`\n#]+?)\s*(?:#.*)?(?:`|$)",
        re.MULTILINE,
    )
    for found in call.finditer(text):
        args = found.group(1).strip()
        if args and not _PLACEHOLDER.search(args):
            quoted = len(args) > 1 and args[0] == args[-1] and args[0] in "'\""
            return args[1:-1] if quoted and args.count(args[0]) == 2 else args
    return None


def _kind(text: str) -> str | None:
    words = {w.lower() for w in _WORD.findall(text.replace("_", " ").replace("-", " "))}
    for word, value in _KINDS:
        if word in words or f"{word}s" in words:
            return value
    return None
