
from mcp.server.mcpserver import MCPServer

server = MCPServer("notes", log_level="WARNING")
notes: list[str] = []

@server.tool()
def add_note(text: str) -> str:
    """Keep a note."""
    notes.append(text)
    return f"{len(notes)} notes"

@server.tool()
def count_notes() -> int:
    """How many notes there are."""
    return len(notes)

@server.tool()
def wipe_notes() -> str:
    """Delete every note."""
    notes.clear()
    return "wiped"

server.run("stdio")
