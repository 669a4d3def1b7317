
from mcp.server.mcpserver import MCPServer
server = MCPServer("web", log_level="WARNING")

@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

server.run("streamable-http", host="127.0.0.1", port=45771)
