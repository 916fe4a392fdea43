"""Hidden tests of the mcp-sqlite-server task: the seed's install / compile / entry point
checks in Python, then what the server does with a real database.

Run in the graded folder: `check.py RESULTS.json` writes one sub-result per test
(`[{"name", "passed", "detail"}]`) and exits 0; the sub-results are the verdicts.
The server is the agent's code: it is started through `$CI_EVALS_AS_AGENT` (another
uid, or namespaces of its own, where it cannot stop, trace or overwrite this
process or its results), and its database lives in a folder it may write.
"""

import ast
import importlib.util
import json
import os
import py_compile
import selectors
import subprocess
import sys
import tempfile

ENTRY = "server.py"
WAIT_S = 5
# Set by ci-evals; by hand, the server runs as you.
AS_AGENT = [os.environ["CI_EVALS_AS_AGENT"]] if os.environ.get("CI_EVALS_AS_AGENT") else []


class Server:
    """`python3 server.py --db PATH`, spoken to over stdio, one reply per request."""

    def __init__(self, db):
        self.process = subprocess.Popen(
            [*AS_AGENT, sys.executable, ENTRY, "--db", db],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.next_id = 0
        try:
            self._initialize()
        except BaseException:
            self.__exit__()
            raise

    def _initialize(self):
        reply = self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "hidden-tests", "version": "1"},
            },
        )
        if "result" not in reply:
            raise AssertionError(f"initialize failed: {reply}")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        line = _readline(self.process, WAIT_S)
        if not line:
            raise AssertionError(f"no reply to {method} (exit {self.process.poll()})")
        return json.loads(line)

    def call(self, tool, arguments):
        reply = self.request("tools/call", {"name": tool, "arguments": arguments})
        if "result" not in reply:
            raise AssertionError(f"{tool} answered an error: {reply.get('error')}")
        result = reply["result"]
        text = "".join(b.get("text", "") for b in result.get("content", []) if isinstance(b, dict))
        return text, bool(result.get("isError"))

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.process.kill()
        self.process.wait()


def _readline(process, timeout):
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline()


def entry_point(_):
    assert os.path.isfile(ENTRY), f"{ENTRY} is missing"
    return f"{ENTRY} present"


def compiles(_):
    py_compile.compile(ENTRY, cfile=os.path.join(tempfile.mkdtemp(), "server.pyc"), doraise=True)
    return "compiles"


def dependencies(_):
    with open(ENTRY, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    missing = sorted(name for name in names if importlib.util.find_spec(name) is None)
    assert not missing, f"not installed here: {', '.join(missing)}"
    return f"imports found: {', '.join(sorted(names))}"


def round_trip(db):
    with Server(db) as server:
        _, failed = server.call("query", {"sql": "create table books (id integer, title text)"})
        assert not failed, "create table failed"
        for sql in ("insert into books values (1, 'Dune')", "insert into books values (2, 'Emma')"):
            _, failed = server.call("query", {"sql": sql})
            assert not failed, f"{sql} failed"
        text, failed = server.call("query", {"sql": "select id, title from books order by id"})
        assert not failed, f"select failed: {text}"
        rows = json.loads(text)
        want = [{"id": 1, "title": "Dune"}, {"id": 2, "title": "Emma"}]
        assert rows == want, f"select gave {rows}"
        return "create, insert, select: the rows came back as objects"


def persists(db):
    with Server(db) as server:
        text, failed = server.call("query", {"sql": "select count(*) as n from books"})
        assert not failed and json.loads(text) == [{"n": 2}], f"a new process saw {text}"
        return "a second server process reads what the first committed"


def list_tables(db):
    with Server(db) as server:
        text, failed = server.call("list_tables", {})
        assert not failed and "books" in json.loads(text), f"list_tables gave {text}"
        return "list_tables names the table"


def sql_error(db):
    with Server(db) as server:
        text, failed = server.call("query", {"sql": "select * from no_such_table"})
        assert failed, f"an SQL error was not isError: {text}"
        reply = server.request("ping", {})
        assert "result" in reply, f"after the SQL error, ping got {reply}"
        return "an SQL error is isError, and the server goes on"


TESTS = [entry_point, compiles, dependencies, round_trip, persists, list_tables, sql_error]


def main():
    out = sys.argv[1]
    folder = tempfile.mkdtemp(prefix="hidden-")
    os.chmod(folder, 0o777)  # noqa: S103 - the server, under another uid, makes its database here
    db = os.path.join(folder, "test.db")
    results = []
    blocked = None
    for test in TESTS:
        name = test.__name__.replace("_", "-")
        if blocked is not None:
            results.append({"name": name, "passed": False, "detail": f"not run: {blocked}"})
            continue
        try:
            detail = test(db)
            results.append({"name": name, "passed": True, "detail": detail})
        except Exception as exc:  # the agent's server at fault: this sub-test fails
            results.append(
                {"name": name, "passed": False, "detail": f"{type(exc).__name__}: {exc}"}
            )
            if test is entry_point:
                blocked = "no entry point"
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
