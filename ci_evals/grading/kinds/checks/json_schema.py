"""`json_schema`: every matching file is JSON valid against a JSON Schema, given
inline, as a suite-relative file or as `plugin:PATH` (read and checked at load).

jsonschema (~130 ms to import) is imported only by a suite with such a check."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import yaml

from ci_evals.fs.copyable import named_problem
from ci_evals.grading.kinds.checks.base import CheckOutcome, Evidence
from ci_evals.grading.kinds.checks.folder import each_file, parse_json, read_text
from ci_evals.grading.kinds.checks.paths import GLOBS_SCHEMA, globs_of
from ci_evals.text import one_line

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import LoadContext


@dataclass(frozen=True)
class JsonSchema:
    keys: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "json_schema": GLOBS_SCHEMA,
        # a file (suite-relative, or `plugin:PATH`), or the schema inline
        "schema": {"anyOf": [{"type": "string"}, {"type": "object"}]},
    }
    reads_trajectory: ClassVar[bool] = False

    id: str
    globs: tuple[str, ...]
    schema: Mapping[str, Any] = field(hash=False)
    schema_source: str = "inline"  # the schema's file, for messages and results

    @classmethod
    def load(
        cls,
        item: LocatedNode,
        given: Mapping[str, LocatedNode],
        explicit_id: str | None,
        ctx: LoadContext,
    ) -> JsonSchema:
        if "schema" not in given:
            raise item.error("missing required key 'schema'")
        schema, source = load_schema(given["schema"], ctx.suite_dir, ctx.plugin_dir, ctx.within)
        globs = globs_of(given["json_schema"])
        return cls(
            id=explicit_id or f"json_schema:{','.join(globs)}",
            globs=globs,
            schema=schema,
            schema_source=source,
        )

    def run(self, evidence: Evidence) -> CheckOutcome:
        import jsonschema  # noqa: PLC0415 - see the module doc

        validator = jsonschema.validators.validator_for(self.schema)(self.schema)

        def problem(path: Path, name: str) -> str | None:
            try:
                document = parse_json(read_text(path))
            except (OSError, ValueError) as exc:
                return f"{name}: not valid JSON ({one_line(str(exc))})"
            try:
                error = jsonschema.exceptions.best_match(validator.iter_errors(document))
            except RecursionError:
                return f"{name}: nested too deeply to validate"
            if error is None:
                return None
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            return f"{name}: at {where}: {one_line(error.message, 200)}"

        passed = f"valid against {self.schema_source}"
        return each_file(self.id, self.globs, evidence.folder, problem, passed)


def load_schema(
    value: LocatedNode, suite_dir: Path, plugin_dir: Path, within: Path
) -> tuple[Mapping[str, Any], str]:
    """A JSON Schema given inline, as a suite-relative file or as `plugin:PATH`; checked.

    A file lies in the repository (`within`), outside .git, as every path a
    suite names (`fs.copyable.named_problem`): a pull request writes the suite."""
    import jsonschema  # noqa: PLC0415 - see the module doc

    if isinstance(value.node, yaml.MappingNode):
        schema: Any = value.plain()
        source = "inline"
        if not isinstance(schema, dict):
            raise value.error("an inline schema must be a mapping")
    else:
        text = value.as_str()
        base = plugin_dir if text.startswith("plugin:") else suite_dir
        name = text.removeprefix("plugin:")
        if (problem := named_problem(name, base, within)) is not None:
            raise value.error(f"schema {text} {problem}")
        path = base / name
        source = str(path)
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise value.error(
                f"schema file not found: {path}",
                hint="relative to the suite file; write plugin:PATH for the plugin folder",
            ) from None
        except (OSError, ValueError) as exc:
            raise value.error(f"cannot read schema {path}: {exc}") from None
        if not isinstance(schema, dict):
            raise value.error(f"schema {path} is not a JSON object")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise value.error(f"invalid JSON Schema: {exc.message}") from None
    return schema, source
