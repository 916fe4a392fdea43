"""An MCP server over stdio giving access to a SQLite database (see README.md).

Start: python3 server.py --db PATH
"""

import argparse
import json
import sqlite3
import sys


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="data.db")
    args = parser.parse_args()
    connection = sqlite3.connect(args.db)
    for line in sys.stdin:
        if line.strip():
            pass  # TODO: parse the JSON-RPC message and answer it (README.md).
    connection.close()


if __name__ == "__main__":
    main()
