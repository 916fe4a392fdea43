"""A tool's `inputSchema`: is it a JSON Schema of an object, and a call's arguments from it.

The spec's default dialect is JSON Schema 2020-12 (explicitly since
2025-11-25); a schema naming another dialect in `$schema` is checked against
that one. jsonschema is imported here only, when a check runs.
"""

from __future__ import annotations

from typing import Any

_MAX_DEPTH = 8  # arguments nested deeper than this are not built (a recursive $ref)
# Arguments bigger than this (characters of strings plus items) are not built: the
# schema is the server's, and `minLength: 10**12` or nested `minItems` would take
# the checker's memory (or, repeated, its time: validating and sending them).
_MAX_SIZE = 100_000


def schema_problem(schema: object) -> str | None:
    """Why `schema` is not a valid JSON Schema of type object; None when it is."""
    import jsonschema  # noqa: PLC0415 - only when a check runs

    if not isinstance(schema, dict):
        return f"is {type(schema).__name__}, not a JSON object"
    if schema.get("type") != "object":
        return f'has "type": {schema.get("type")!r}, not "object"'
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        return f"is not a valid JSON Schema at {where}: {exc.message[:200]}"
    except Exception as exc:  # nested too deeply, an unknown $schema: the server's
        return f"cannot be checked ({type(exc).__name__}: {str(exc)[:200]})"
    return None


def instance_problem(instance: Any, schema: dict[str, Any]) -> str | None:
    """Why `instance` does not conform to `schema`; None when it does."""
    import jsonschema  # noqa: PLC0415

    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        error = jsonschema.exceptions.best_match(cls(schema).iter_errors(instance))
    except Exception as exc:  # the schema is the server's data: any failure is its
        return f"the schema cannot be applied ({type(exc).__name__}: {str(exc)[:200]})"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.path) or "(root)"
    return f"{where}: {error.message[:200]}"


def example_arguments(schema: dict[str, Any]) -> dict[str, Any] | None:
    """Arguments for a tool built from its input schema (its required properties,
    each from `const`, `default`, `examples`, `enum` or its type), checked against
    the schema; None when no such value could be built."""
    value = _example(schema, schema, 0)
    if not isinstance(value, dict) or not _small(value):
        return None
    if instance_problem(value, schema) is not None:
        return None
    return value


def _small(value: Any) -> bool:
    """Whether `value` is within `_MAX_SIZE`, found in at most that many steps (the
    items of a built array are one object repeated: its size is not its memory)."""
    left = _MAX_SIZE
    stack = [value]
    while stack:
        item = stack.pop()
        left -= len(item) + 1 if isinstance(item, str) else 1
        if left < 0:
            return False
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item)  # its keys
            stack.extend(item.values())
    return True


def _example(node: Any, root: dict[str, Any], depth: int) -> Any:  # noqa: PLR0911 - one per keyword
    if depth > _MAX_DEPTH or not isinstance(node, dict):
        return None
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        return _example(target, root, depth + 1)
    for key in ("const", "default"):
        if key in node:
            return node[key]
    for key in ("examples", "enum"):
        if isinstance(node.get(key), list) and node[key]:
            return node[key][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(node.get(key), list) and node[key]:
            return _example(node[key][0], root, depth + 1)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind == "object" or (kind is None and "properties" in node):
        properties = node.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = node.get("required")
        required = required if isinstance(required, list) else []
        return {
            name: _example(properties.get(name, {}), root, depth + 1)
            for name in required
            if isinstance(name, str)
        }
    return _scalar(kind, node, root, depth)


def _scalar(kind: Any, node: dict[str, Any], root: dict[str, Any], depth: int) -> Any:  # noqa: PLR0911
    if kind == "string":
        length = node.get("minLength", 0)
        if not isinstance(length, int) or length <= 8:
            return "ci-evals"
        return "x" * length if length <= _MAX_SIZE else None
    if kind in ("integer", "number"):
        low = node.get("minimum", node.get("exclusiveMinimum"))
        if isinstance(low, (int, float)) and not isinstance(low, bool):
            return int(low) + 1 if kind == "integer" else low + 1
        return 1
    if kind == "boolean":
        return True
    if kind == "array":
        count = node.get("minItems", 0)
        if not isinstance(count, int):
            count = 0
        if count > _MAX_SIZE:
            return None
        item = _example(node.get("items", {}), root, depth + 1)
        return [item] * count
    return None
