"""Names users reach for beside the core: prices, MCP toolsets, guardrails, Claude's own tools, each
at its public home, and none of them loads an SDK before it is used."""

from __future__ import annotations

import subprocess
import sys

import loopwright
import loopwright.features
import loopwright.integrations.mcp
import loopwright.models

HOMES = {
    "Block": loopwright.features,
    "Guardrail": loopwright.features,
    "Rewrite": loopwright.features,
    "McpToolset": loopwright.integrations.mcp,
    "register_price": loopwright.models,
    "claude_tool": loopwright,
}


def test_the_names_are_public_and_the_same_objects_as_their_modules() -> None:
    from loopwright.features.guardrails import Block, Guardrail, Rewrite
    from loopwright.integrations.mcp.toolset import McpToolset
    from loopwright.models.prices import register_price
    from loopwright.runtime.claude_tools import claude_tool

    for name, home in HOMES.items():
        assert name in home.__all__, name
        assert getattr(home, name).__module__ == home.__name__, name
    assert loopwright.features.Block is Block and loopwright.features.Guardrail is Guardrail
    assert loopwright.features.Rewrite is Rewrite
    assert loopwright.integrations.mcp.McpToolset is McpToolset
    assert loopwright.models.register_price is register_price
    assert loopwright.claude_tool is claude_tool


def test_a_fresh_interpreter_imports_them_without_the_mcp_sdk() -> None:
    """``from loopwright.integrations.mcp import McpToolset`` works and loads no ``mcp`` SDK until a toolset
    connects; nothing here loads the anthropic SDK."""
    code = (
        "import sys\n"
        "from loopwright.features import Block, Guardrail, Rewrite\n"
        "from loopwright.integrations.mcp import McpToolset\n"
        "from loopwright.models import register_price\n"
        "from loopwright import claude_tool\n"
        "McpToolset.stdio(sys.executable, ['server.py'])\n"
        "print('mcp' in sys.modules, 'anthropic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"], done.stderr
