"""Names users reach for from ``loopwright`` itself: prices, MCP toolsets, guardrails, Claude's own tools."""

from __future__ import annotations

import subprocess
import sys

import loopwright

GAP_NAMES = ("Block", "Guardrail", "McpToolset", "Rewrite", "claude_tool", "register_price")


def test_the_names_are_public_and_the_same_objects_as_their_modules() -> None:
    from loopwright.features.guardrails import Block, Guardrail, Rewrite
    from loopwright.integrations.mcp import McpToolset
    from loopwright.models.prices import register_price
    from loopwright.runtime.claude_tools import claude_tool

    for name in GAP_NAMES:
        assert name in loopwright.__all__, name
    assert loopwright.Block is Block and loopwright.Guardrail is Guardrail and loopwright.Rewrite is Rewrite
    assert loopwright.McpToolset is McpToolset
    assert loopwright.register_price is register_price
    assert loopwright.claude_tool is claude_tool


def test_a_fresh_interpreter_imports_them_without_the_mcp_sdk() -> None:
    """``from loopwright import McpToolset`` works and loads no ``mcp`` SDK until a toolset connects."""
    code = (
        "import sys\n"
        "from loopwright import Block, Guardrail, McpToolset, Rewrite, claude_tool, register_price\n"
        "McpToolset.stdio(sys.executable, ['server.py'])\n"
        "print('mcp' in sys.modules, 'anthropic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"], done.stderr
