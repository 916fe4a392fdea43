"""A real MCP server built with the official `mcp` package (2.x, MCPServer, once FastMCP)."""

from mcp.server.mcpserver import MCPServer

app = MCPServer("calculator")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def shout(text: str, times: int = 1) -> str:
    """Upper-case a text, repeated."""
    return " ".join([text.upper()] * times)


if __name__ == "__main__":
    app.run()
