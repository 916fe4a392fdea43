"""A stage's `checks:` list, each item loaded by the kind its key names.

Which keys a check may have, and which key names its kind, come from the
kinds in `registry`: nothing here knows any one kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.grading.kinds.base import LoadContext
from ci_evals.grading.kinds.checks.base import ID, Check, CheckKind
from ci_evals.grading.kinds.checks.registry import CHECK_KINDS

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode


def load_checks(
    field: LocatedNode, *, suite_dir: Path, plugin_dir: Path, within: Path
) -> tuple[Check, ...]:
    """A stage's `checks:` list. Schema files are read now, so a typo fails at load.

    A schema path is relative to the suite file's folder, or to the plugin
    folder when written `plugin:PATH`.
    """
    ctx = LoadContext(suite_dir, plugin_dir, within)
    kinds = {name: CHECK_KINDS.get(name) for name in CHECK_KINDS.builtin}
    allowed = {ID, *(key for kind in kinds.values() for key in kind.keys)}
    checks: list[Check] = []
    seen: dict[str, LocatedNode] = {}
    for item in field.sequence():
        check = _load_one(item, kinds, allowed, ctx)
        if check.id in seen:
            raise item.error(
                f"duplicate check id {check.id!r} (also line {seen[check.id].line})",
                hint="give one of them an explicit 'id:'",
            )
        seen[check.id] = item
        checks.append(check)
    return tuple(checks)


def _load_one(
    item: LocatedNode, kinds: Mapping[str, CheckKind], allowed: set[str], ctx: LoadContext
) -> Check:
    given = item.mapping(allowed, what="check")
    named = [name for name in kinds if name in given]
    if len(named) != 1:
        raise item.error(
            "a check names exactly one kind" + (f", got {', '.join(named)}" if named else ""),
            hint="one of: " + ", ".join(kinds),
        )
    name = named[0]
    kind = kinds[name]
    extra = [key for key in given if key != ID and key not in kind.keys]
    if extra:
        options = [key for key in kind.keys if key != name]
        raise given[extra[0]].error(
            f"{extra[0]!r} does not apply to a {name!r} check",
            hint="keys for it: " + ", ".join(options or ("(none)",)),
        )
    explicit_id = given[ID].as_str() if ID in given else None
    return kind.load(item, given, explicit_id, ctx)
