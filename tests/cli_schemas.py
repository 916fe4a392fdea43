"""The JSON Schemas of the commands' `--json` documents (ci_evals/schemas/cli/),
and a document checked against one as an editor or check-jsonschema would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import ci_evals

CLI_SCHEMAS = Path(ci_evals.__file__).parent / "schemas" / "cli"


def _registry() -> Registry:
    """Every CLI schema by its file URI, so `common.json#/...` resolves as an editor's does."""
    resources = [
        (path.as_uri(), Resource.from_contents(json.loads(path.read_text()), DRAFT202012))
        for path in CLI_SCHEMAS.glob("*.json")
    ]
    return Registry().with_resources(resources)


def validate(document: dict[str, Any], command: str) -> None:
    path = CLI_SCHEMAS / f"{command}.json"
    schema = json.loads(path.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(
        {"$ref": path.as_uri()}, registry=_registry(), format_checker=None
    )
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
    assert not errors, errors
