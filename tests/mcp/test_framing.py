"""ci_evals.mcp.framing and .schemas: stdout as JSON-RPC lines, and tools' input schemas."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ci_evals.mcp.framing import LineReader, Message, Violation, parse_line
from ci_evals.mcp.schemas import example_arguments, instance_problem, schema_problem
from ci_evals.mcp.session import same_id

PING = {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_messages_cut_anywhere_come_out_whole() -> None:
    data = (json.dumps(PING) + "\n" + json.dumps({"jsonrpc": "2.0", "method": "x"}) + "\n").encode()
    for cut in range(len(data)):
        reader = LineReader()
        events = reader.feed(data[:cut]) + reader.feed(data[cut:]) + reader.close()
        assert [e.body for e in events if isinstance(e, Message)] == [
            PING,
            {"jsonrpc": "2.0", "method": "x"},
        ]
        assert not [e for e in events if isinstance(e, Violation)]


@given(st.lists(st.integers(min_value=1, max_value=40), max_size=20))
def test_any_chunking_gives_the_same_events(sizes: list[int]) -> None:
    data = (
        b'{"jsonrpc":"2.0","id":1,"result":{}}\nnot json\n\xff\xfe\n'
        b'{"jsonrpc":"2.0","id":2,"result":1}\n'
    )
    whole = LineReader().feed(data)
    reader, events, at = LineReader(), [], 0
    for size in sizes:
        events += reader.feed(data[at : at + size])
        at += size
    events += reader.feed(data[at:])
    assert events == whole


def test_a_line_over_the_cap_is_one_violation_and_is_never_held() -> None:
    reader = LineReader(cap=100)
    events = reader.feed(b"x" * 60)
    events += reader.feed(b"x" * 60)  # over the cap here: the buffer is dropped
    assert reader._partial == bytearray()
    events += reader.feed(b"x" * 1000 + b"\n" + json.dumps(PING).encode() + b"\n")
    assert events == [Violation("a line of 1120 bytes (cap 100)"), Message(PING)]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b"\xff\xfe hello", "not UTF-8"),
        (b"Server started", "not JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"id": 1, "result": {}}', '"jsonrpc": "2.0"'),
        (b'{"jsonrpc": "2.0", "id": 1}', "neither request"),
        (b"[" * 100_000, "nested too deeply"),
        # Python's json reads these; JSON has no such literals.
        (b'{"jsonrpc": "2.0", "id": 1, "result": {"x": NaN}}', "not JSON"),
        (b'{"jsonrpc": "2.0", "id": 1, "result": {"x": -Infinity}}', "not JSON"),
    ],
)
def test_what_is_not_a_message(line: bytes, said: str) -> None:
    event = parse_line(line)
    assert isinstance(event, Violation)
    assert said in event.text


def test_crlf_and_blank_lines_are_tolerated_an_unterminated_line_is_not() -> None:
    reader = LineReader()
    assert reader.feed(b"\n\r\n" + json.dumps(PING).encode() + b"\r\n") == [Message(PING)]
    reader.feed(json.dumps(PING).encode())
    assert [type(e) for e in reader.close()] == [Violation]


def test_example_arguments_follow_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "sql": {"type": "string", "minLength": 12},
            "limit": {"type": "integer", "minimum": 5, "maximum": 10},
            "mode": {"enum": ["read", "write"]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "where": {"$ref": "#/$defs/filter"},
            "optional": {"type": "string"},
        },
        "required": ["sql", "limit", "mode", "tags", "where"],
        "$defs": {
            "filter": {
                "type": "object",
                "properties": {"on": {"type": "boolean"}},
                "required": ["on"],
            }
        },
    }
    arguments = example_arguments(schema)
    assert arguments is not None
    assert instance_problem(arguments, schema) is None
    assert set(arguments) == {"sql", "limit", "mode", "tags", "where"}


def test_no_arguments_when_the_schema_cannot_be_met() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "maximum": 0, "minimum": 5}},
        "required": ["n"],
    }
    assert example_arguments(schema) is None


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ([], "not a JSON object"),
        ({"type": "string"}, 'not "object"'),
        ({"type": "object", "properties": {"x": {"type": "integr"}}}, "properties/x/type"),
        ({"type": "object", "required": "x"}, "required"),
    ],
)
def test_schema_problems(schema: object, said: str) -> None:
    problem = schema_problem(schema)
    assert problem is not None and said in problem


def test_a_valid_object_schema_has_no_problem() -> None:
    assert schema_problem({"type": "object", "properties": {"a": {"type": "integer"}}}) is None


def test_an_id_matches_only_its_own_json_type() -> None:
    assert same_id(1, 1) and same_id("a", "a")
    assert not same_id(True, 1) and not same_id(1.0, 1) and not same_id("1", 1)


ERR = {"code": -32602, "message": "Unknown tool"}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"id": 1, "result": {}}, None),
        ({"id": 1, "error": ERR}, None),
        ({"id": None, "error": {**ERR, "data": [1]}}, None),
        ({"id": 1, "method": "ping"}, None),  # a request: no reply to judge
        ({"id": 1, "error": ERR, "result": {}}, "both result and error"),
        ({"id": 1, "error": None}, "not an object"),
        ({"id": 1, "error": "Unknown tool"}, "not an object"),
        ({"id": 1, "error": {"code": True, "message": "x"}}, "integer code"),
        ({"id": 1, "error": {"code": -32602.5, "message": "x"}}, "integer code"),
        ({"id": 1, "error": {"code": -32602}}, "string message"),
    ],
)
def test_a_reply_that_is_no_json_rpc_response_says_why(
    body: dict[str, object], problem: str | None
) -> None:
    found = Message({"jsonrpc": "2.0", **body}).reply_problem
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def _nested_arrays(levels: int, count: int) -> dict[str, object]:
    node: dict[str, object] = {"type": "integer"}
    for _ in range(levels):
        node = {"type": "array", "minItems": count, "items": node}
    return node


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "minLength": 10**12},  # a terabyte
        {"type": "array", "minItems": 10**12},
        _nested_arrays(6, 50),  # 50**6 integers: one list repeated, but validated and sent whole
    ],
)
def test_arguments_too_big_to_build_are_not_built(prop: dict[str, object]) -> None:
    schema = {"type": "object", "properties": {"a": prop}, "required": ["a"]}
    assert example_arguments(schema) is None


def test_arguments_of_a_fair_size_are_built() -> None:
    schema = {"type": "object", "properties": {"a": _nested_arrays(2, 10)}, "required": ["a"]}
    assert example_arguments(schema) == {"a": [[1] * 10] * 10}
