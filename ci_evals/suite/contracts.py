"""Phase contracts: what each stage `produces` and what it `consumes` of earlier stages.

```yaml
produces:
  - { files: "lab/plan.json", count: 1, schema: "plugin:templates/plan.schema.json" }
consumes:
  - { file: "lab/plan.json", fields: [/chapters/*/slug, /chapter_count] }
```

Nothing here is a second checking engine: every item compiles to the
deterministic checks of `grading.kinds.checks` (files, headings, front matter,
JSON Schema — a consumed JSON pointer becomes a small schema that requires
it). A stage's `produces` becomes the grader `contract`, so a broken contract
is a criterion of its own wherever the stage is graded (after a live stage,
in `grade`, in `check-fixtures`); `consumes` is checked against the fixtures
that come before the stage (`check-fixtures`). At load, every consumed item
must be produced by an earlier stage's contract (or be a file of the stage-0
seed fixture): else one line naming the consuming item's file:line and both
stages. Every key: docs/contracts.md.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci_evals.errors import UserError
from ci_evals.grading.kinds.checks.base import Check
from ci_evals.grading.kinds.checks.files import FilesExist
from ci_evals.grading.kinds.checks.front_matter import HasFrontMatter
from ci_evals.grading.kinds.checks.grader import ChecksGrader
from ci_evals.grading.kinds.checks.headings import HasHeadings, normalize_heading
from ci_evals.grading.kinds.checks.json_schema import JsonSchema, load_schema
from ci_evals.grading.kinds.checks.paths import globs_of
from ci_evals.selection.suite_change import covers as _covers
from ci_evals.text import display_path

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode

CONTRACT_GRADER = "contract"
PRODUCES_KEYS = ("files", "count", "min", "max", "schema", "fields", "headings", "front_matter")
CONSUMES_KEYS = ("file", "from", "fields", "headings", "front_matter")
# The seed fixture stage 1 starts from: "stage 0 produces whatever files it holds".
SEED_PREFIX = "0-"
EVERY_ITEM = "*"  # in a JSON pointer here: every item of a list
_DRAFT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class Produced:
    """One `produces` item: files matching `globs`, and what each must hold."""

    index: int
    line: int
    globs: tuple[str, ...]
    count: int | None = None
    min: int | None = None
    max: int | None = None
    schema: Mapping[str, Any] | None = field(default=None, hash=False)
    schema_source: str = "inline"
    fields: tuple[str, ...] = ()  # JSON pointers every file must have
    headings: tuple[str, ...] = ()  # normalised ("## Steps", or a path "A > B")
    front_matter: tuple[str, ...] = ()

    def checks(self) -> tuple[Check, ...]:
        base = f"{CONTRACT_GRADER}:produces[{self.index}]"
        bounds = {"count": self.count, "min": self.min, "max": self.max}
        if all(value is None for value in bounds.values()):
            bounds["min"] = 1
        found: list[Check] = [FilesExist(f"{base}.files", self.globs, **bounds)]
        if self.schema is not None:
            found.append(JsonSchema(f"{base}.schema", self.globs, self.schema, self.schema_source))
        return (*found, *_content_checks(base, self.globs, self))


@dataclass(frozen=True)
class Consumed:
    """One `consumes` item: a file (or glob) of an earlier stage, and what is read of it."""

    index: int
    line: int
    file: str
    producer: int  # the stage whose contract produces it (0: the seed fixture)
    fields: tuple[str, ...] = ()
    headings: tuple[str, ...] = ()
    front_matter: tuple[str, ...] = ()

    def checks(self) -> tuple[Check, ...]:
        base = f"{CONTRACT_GRADER}:consumes[{self.index}]"
        globs = (self.file,)
        return (FilesExist(f"{base}.file", globs, min=1), *_content_checks(base, globs, self))


def _content_checks(base: str, globs: tuple[str, ...], item: Produced | Consumed) -> list[Check]:
    found: list[Check] = []
    if item.fields:
        schema = pointer_schema(item.fields)
        found.append(JsonSchema(f"{base}.fields", globs, schema, "the contract's fields"))
    if item.headings:
        found.append(HasHeadings(f"{base}.headings", globs, item.headings))
    if item.front_matter:
        found.append(HasFrontMatter(f"{base}.front_matter", globs, item.front_matter))
    return found


@dataclass(frozen=True)
class Contract:
    stage: int
    produces: tuple[Produced, ...] = ()
    consumes: tuple[Consumed, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.produces and not self.consumes

    def grader(self) -> ChecksGrader | None:
        """The stage's `produces` as one grader, `contract` (None when it declares none)."""
        checks = tuple(check for item in self.produces for check in item.checks())
        return ChecksGrader(checks, name=CONTRACT_GRADER) if checks else None


# -- loading -------------------------------------------------------------------


def load_produces(
    value: LocatedNode, *, suite_dir: Path, plugin_dir: Path, within: Path
) -> tuple[Produced, ...]:
    items = []
    for index, item in enumerate(value.sequence()):
        keys = item.mapping(PRODUCES_KEYS, required=("files",), what="produces item")
        bounds = {k: keys[k].as_int(minimum=0) for k in ("count", "min", "max") if k in keys}
        if "count" in bounds and len(bounds) > 1:
            raise keys["count"].error("use either 'count' or 'min'/'max'")
        if "min" in bounds and "max" in bounds and bounds["min"] > bounds["max"]:
            raise keys["max"].error(f"max {bounds['max']} is below min {bounds['min']}")
        schema, source = None, "inline"
        if "schema" in keys:
            schema, source = load_schema(keys["schema"], suite_dir, plugin_dir, within)
        items.append(
            Produced(
                index=index,
                line=item.line,
                globs=globs_of(keys["files"]),
                count=bounds.get("count"),
                min=bounds.get("min"),
                max=bounds.get("max"),
                schema=schema,
                schema_source=source,
                **_reads(keys),
            )
        )
    return tuple(items)


def _reads(keys: Mapping[str, LocatedNode]) -> dict[str, tuple[str, ...]]:
    """`fields` (JSON pointers), `headings`, `front_matter` of an item, validated."""
    reads: dict[str, tuple[str, ...]] = {}
    if "fields" in keys:
        pointers = []
        for item in keys["fields"].sequence(allow_empty=False):
            text = item.as_str()
            if not text.startswith("/"):
                raise item.error(
                    f"{text!r} is not a JSON pointer",
                    hint="a JSON pointer starts with '/': /chapters/*/slug "
                    "('*' is every item of a list)",
                )
            pointers.append(text)
        reads["fields"] = tuple(pointers)
    if "headings" in keys:
        headings = keys["headings"].as_str_list(allow_empty=False)
        reads["headings"] = tuple(normalize_heading(h) for h in headings)
    if "front_matter" in keys:
        reads["front_matter"] = tuple(keys["front_matter"].as_str_list(allow_empty=False))
    return reads


@dataclass(frozen=True)
class Upstream:
    """What the stages before `stage` (the consuming one) produce."""

    stage: int
    names: tuple[str, ...]  # every stage's name, index 0 = stage 1
    contracts: Sequence[Contract]  # the stages before, in order
    seed_files: Sequence[str]  # the seed fixture's files (POSIX, relative)
    seed_display: str | None  # the seed folder as shown, None when there is none


def load_consumes(value: LocatedNode, earlier: Upstream) -> tuple[Consumed, ...]:
    items = []
    for index, item in enumerate(value.sequence()):
        keys = item.mapping(CONSUMES_KEYS, required=("file",), what="consumes item")
        file = globs_of(keys["file"])
        if len(file) != 1:
            raise keys["file"].error("one path or glob per consumes item")
        reads = _reads(keys)
        if not reads:
            raise item.error(
                "say what is read of the file: fields, headings or front_matter",
                hint="a file read whole is still a file: list the headings or fields used",
            )
        wanted = None
        if "from" in keys:
            wanted = _stage_key(keys["from"], earlier.names, earlier.stage)
        consumed = Consumed(index, item.line, file[0], producer=0, **reads)
        items.append(replace(consumed, producer=_producer(consumed, wanted, earlier, item)))
    return tuple(items)


def _stage_key(value: LocatedNode, names: Sequence[str], stage: int) -> int:
    text = str(value.plain()).strip()
    number = int(text) if text.isdigit() else (names.index(text) + 1 if text in names else None)
    if number is None or not 0 <= number < stage:
        before = ", ".join(f"{i} {n}" for i, n in enumerate(names[: stage - 1], start=1))
        raise value.error(
            f"'from' must name a stage before stage {stage}, got {text!r}",
            hint=f"earlier stages: {before or 'none'} (0 is the seed fixture)",
        )
    return number


def _label(stage: int, names: Sequence[str]) -> str:
    return "the seed fixture (stage 0)" if stage == 0 else f"stage {stage} ({names[stage - 1]})"


def _producer(item: Consumed, wanted: int | None, earlier: Upstream, where: LocatedNode) -> int:
    """The latest earlier stage whose contract produces all of `item` (or 0, the seed)."""
    names, seed_display = earlier.names, earlier.seed_display
    me = _label(earlier.stage, names)
    candidates = [c for c in reversed(earlier.contracts) if wanted in (None, c.stage)]
    closest: tuple[Contract, Produced, str] | None = None
    for contract in candidates:
        for produced in contract.produces:
            if not any(_covers(glob, item.file) for glob in produced.globs):
                continue
            missing = _unproduced(item, produced)
            if not missing:
                return contract.stage
            if closest is None:
                closest = (contract, produced, missing)
    if wanted in (None, 0) and any(_covers(item.file, f) for f in earlier.seed_files):
        return 0
    if closest is not None:
        contract, produced, missing = closest
        raise where.error(
            f"{me} consumes {missing} of {item.file}, but {_label(contract.stage, names)} "
            f"does not produce it (its contract: line {produced.line})",
            hint="add it to that stage's produces (headings / fields / schema), "
            "or stop reading it here",
        )
    if wanted is not None and wanted > 0:
        whose = f"the contract of {_label(wanted, names)} does not produce it"
    else:
        seed = (
            f"nor does the seed fixture {seed_display} hold it"
            if seed_display
            else "and no seed fixture"
        )
        whose = f"no earlier stage's contract produces it, {seed}"
        if wanted == 0:
            whose = f"the seed fixture {seed_display or 'fixtures/0-*/'} does not hold it"
    raise where.error(
        f"{me} consumes {item.file}, but {whose}",
        hint="declare it in an earlier stage's produces (files:), or put it in the seed "
        "fixture fixtures/0-<name>/",
    )


def _unproduced(item: Consumed, produced: Produced) -> str:
    """What of `item` the `produced` item does not guarantee ("" when it covers all)."""
    for pointer in item.fields:
        if pointer not in produced.fields and not _schema_requires(produced.schema, pointer):
            return f"field {pointer}"
    for heading in item.headings:
        if not any(_heading_covers(have, heading) for have in produced.headings):
            return f"heading {heading!r}"
    for key in item.front_matter:
        if key not in produced.front_matter:
            return f"front-matter field {key!r}"
    return ""


def _heading_covers(have: str, want: str) -> bool:
    if have == want:
        return True
    # "## Steps" produced covers "Steps" consumed (any level), part by part for paths.
    mine, theirs = have.split(" > "), want.split(" > ")
    return len(mine) == len(theirs) and all(
        h == w or (not w.startswith("#") and h.split(" ", 1)[-1] == w)
        for h, w in zip(mine, theirs, strict=True)
    )


# -- JSON pointers -------------------------------------------------------------


def pointer_tokens(pointer: str) -> list[str]:
    """RFC 6901 tokens (`~1` is `/`, `~0` is `~`); `*` stands for every item of a list."""
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def pointer_schema(pointers: Sequence[str]) -> dict[str, Any]:
    """A JSON Schema that a document satisfies when it has every pointer: what
    the JSON Schema check then reports names the exact missing field."""
    root: dict[str, Any] = {}
    for pointer in pointers:
        node = root
        for token in pointer_tokens(pointer):
            if token == EVERY_ITEM:
                node["type"] = "array"
                node = node.setdefault("items", {})
            elif token.isdigit():
                index = int(token)
                node["type"] = "array"
                node["minItems"] = max(node.get("minItems", 0), index + 1)
                prefix = node.setdefault("prefixItems", [])
                prefix.extend({} for _ in range(index + 1 - len(prefix)))
                node = prefix[index]
            else:
                node["type"] = "object"
                required = node.setdefault("required", [])
                if token not in required:
                    required.append(token)
                node = node.setdefault("properties", {}).setdefault(token, {})
    return {"$schema": _DRAFT, **root}


def _schema_requires(schema: Mapping[str, Any] | None, pointer: str) -> bool:
    """Whether every document valid against `schema` has `pointer` (properties +
    required, items, local $ref, allOf); unsure is False."""
    if schema is None:
        return False
    root = schema
    node: Any = schema
    for token in pointer_tokens(pointer):
        node = _deref(root, node)
        if not isinstance(node, Mapping):
            return False
        if token == EVERY_ITEM:
            items = node.get("items")
            if not isinstance(items, Mapping):
                return False
            node = items
            continue
        found = _required_child(root, node, token)
        if found is None:
            return False
        node = found
    return True


def _required_child(root: Mapping[str, Any], node: Mapping[str, Any], token: str) -> Any:
    if token.isdigit():
        index = int(token)
        prefix = node.get("prefixItems")
        if node.get("minItems", 0) > index:
            if isinstance(prefix, list) and index < len(prefix):
                return prefix[index]
            items = node.get("items")
            return items if isinstance(items, Mapping) else {}
    required = node.get("required")
    if isinstance(required, list) and token in required:
        properties = node.get("properties")
        if isinstance(properties, Mapping) and token in properties:
            return properties[token]
        return {}  # required, of any shape
    for written in node.get("allOf", ()) or ():
        part = _deref(root, written)
        if isinstance(part, Mapping):
            found = _required_child(root, part, token)
            if found is not None:
                return found
    return None


def _deref(root: Mapping[str, Any], node: Any) -> Any:
    for _ in range(32):  # a chain of local references, not a loop
        if not isinstance(node, Mapping) or not isinstance(node.get("$ref"), str):
            return node
        ref = node["$ref"]
        if not ref.startswith("#"):
            return None
        target: Any = root
        for token in pointer_tokens(ref[1:]) if ref != "#" else []:
            if not isinstance(target, Mapping) or token not in target:
                return None
            target = target[token]
        node = target
    return None


def seed_folder(fixtures: Path) -> Path | None:
    """The seed fixture folder (`fixtures/0-*/`) or None: what the run lays before
    fixture 1 and the contracts count as stage 0's output. Two are an error naming
    both: which one stage 1 starts from would be a guess."""
    try:
        seeds = sorted(
            p for p in fixtures.iterdir() if p.is_dir() and p.name.startswith(SEED_PREFIX)
        )
    except OSError:
        return None
    if len(seeds) > 1:
        raise UserError(
            f"{display_path(fixtures)} holds {len(seeds)} stage-1 seeds: "
            f"{', '.join(p.name for p in seeds)}",
            hint=f"keep one {SEED_PREFIX}<name>/ folder; merge the others into it",
        )
    return seeds[0] if seeds else None


def seed_files(fixtures: Path) -> tuple[str | None, list[str]]:
    """The seed fixture folder (`fixtures/0-*/`, shown relative) and its files."""
    folder = seed_folder(fixtures)
    if folder is None:
        return None, []
    from ci_evals.fs.walk import walk  # noqa: PLC0415

    files = [rel for rel, kind, _ in walk(folder, skip_unreadable=True) if kind != "dir"]
    return posixpath.join(fixtures.name, folder.name), files
