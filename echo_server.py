
from mcp.server.mcpserver import MCPServer
server = MCPServer("echo", log_level="WARNING")

@server.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text

server.run("stdio")
