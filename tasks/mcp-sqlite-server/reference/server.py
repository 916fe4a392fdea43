"""A SQLite MCP server on the standard library (the scripted agent's answer to the task).

python3 server.py --db PATH: MCP 2025-11-25 over stdio, tools `query` and `list_tables`.
"""

import argparse
import json
import sqlite3
import sys

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
INFO = {"name": "sqlite-server", "version": "1.0"}
TOOLS = [
    {
        "name": "query",
        "description": "Run one SQL statement; rows as a JSON list of objects.",
        "inputSchema": {
            "type": "object",
            "properties": {"sql": {"type": "string", "description": "one SQL statement"}},
            "required": ["sql"],
        },
    },
    {
        "name": "list_tables",
        "description": "The names of the database's tables, as a JSON list.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def reply(request_id, result):
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def error(request_id, code, text):
    send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}})


def text_result(value, is_error=False):
    result = {"content": [{"type": "text", "text": value}]}
    if is_error:
        result["isError"] = True
    return result


def run_query(connection, sql):
    try:
        cursor = connection.execute(sql)
        if cursor.description is None:
            connection.commit()
            return text_result(json.dumps({"changes": cursor.rowcount}))
        names = [column[0] for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        return text_result(json.dumps(rows, default=str))
    except sqlite3.Error as exc:
        return text_result("SQL error: " + str(exc), is_error=True)


def call_tool(connection, params):
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if name == "query":
        sql = arguments.get("sql")
        if not isinstance(sql, str):
            return text_result("query needs sql (a string)", is_error=True)
        return run_query(connection, sql)
    if name == "list_tables":
        rows = connection.execute(
            "select name from sqlite_master where type = 'table' order by name"
        ).fetchall()
        return text_result(json.dumps([row[0] for row in rows]))
    return None


def handle(connection, message):
    method = message["method"]
    params = message.get("params") or {}
    if "id" not in message:
        return  # a notification: never answered
    request_id = message["id"]
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in VERSIONS else VERSIONS[-1]
        reply(
            request_id,
            {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": INFO},
        )
    elif method == "ping":
        reply(request_id, {})
    elif method == "tools/list":
        reply(request_id, {"tools": TOOLS})
    elif method == "tools/call":
        result = call_tool(connection, params)
        if result is None:
            error(request_id, -32602, "Unknown tool: " + str(params.get("name")))
        else:
            reply(request_id, result)
    else:
        error(request_id, -32601, "Method not found: " + method)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="data.db")
    options = parser.parse_args()
    connection = sqlite3.connect(options.db)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            error(None, -32700, "Parse error")
            continue
        if not (
            isinstance(message, dict)
            and message.get("jsonrpc") == "2.0"
            and isinstance(message.get("method"), str)
        ):
            request_id = message.get("id") if isinstance(message, dict) else None
            valid_id = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
            error(request_id if valid_id else None, -32600, "Invalid Request")
            continue
        handle(connection, message)
    connection.close()


if __name__ == "__main__":
    main()
