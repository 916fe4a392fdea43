"""JSON text as JavaScript writes it, checked against node's own `JSON.stringify`.

node is the oracle (a process boundary): the same JSON documents are parsed and
written again by both, and the texts compared. The documents hit what Python's
`json.dumps` writes otherwise: integral floats, small and large exponents,
integers past 2**53, negative zero, lone surrogates, control characters and
line separators.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from ci_evals.grading.kinds.js_json import stringify

DOCUMENTS = [
    "1.0",
    "[1e-7, 1.5e-5, 0.000001, 1e-6, 123e-20, 1e21, 1e20, 123456789012345678901]",
    "[9007199254740993, -9007199254740993, 9007199254740992, 12345678901234567890123]",
    "[-0, -0.0, 0.1, 100, 1e300, -2.5e-300, 5e-324, 1.7976931348623157e308]",
    '["\\ud83d", "\\ud83d\\ude00", "a\\u0007b", "\\u2028\\u2029", "\\u007f\\u0085", "\\"\\\\/"]',
    '{"b": 1, "a": [true, false, null, {}], "": {"x": "é"}, "n": 3.14}',
    '{"type":"tool_use","input":{"file_path":"/tmp/x","limit":2000.0}}',
]


@pytest.fixture(scope="module")
def node_outputs() -> list[str]:
    node = shutil.which("node")
    assert node is not None, "node is needed as the oracle (apt-get install nodejs)"
    script = (
        "const docs = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(docs.map((d) => JSON.stringify(JSON.parse(d)))));"
    )
    done = subprocess.run(
        [node, "-e", script],
        input=json.dumps(DOCUMENTS),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    outputs: list[str] = json.loads(done.stdout)
    return outputs


@pytest.mark.parametrize("index", range(len(DOCUMENTS)))
def test_stringify_writes_what_javascript_writes(index: int, node_outputs: list[str]) -> None:
    assert stringify(json.loads(DOCUMENTS[index])) == node_outputs[index]
