"""``agent_tool``: an agent used as a tool of another agent.

Calling the tool runs the agent on the task the model gives it, as a child of the calling run
(:mod:`loopwright.runtime.nesting`): it charges the caller's budgets, ends by the caller's deadline and
counts toward ``Limits.max_depth``. It gets the calling run's ``deps`` (``ctx.deps`` in its
tools, instructions and callbacks), unless ``agent_tool(agent, deps=...)`` gives it its own.
The tool's result is the agent's answer; a run that does not answer (failed, cancelled, out of
budget with no salvage, waiting for a person) is an error result naming the agent and why.
"""

from __future__ import annotations

from typing import Any

from ..data.errors import ConfigurationError, ToolError
from ..runtime.agent import Agent
from ..runtime.tools import Tool, ToolContext
from .runner import Runner


def agent_tool(agent: Agent, *, name: str | None = None, description: str | None = None, deps: Any = None) -> Tool:
    """A tool that hands a task to ``agent`` and answers with its final text.

    ``name`` defaults to the agent's name and ``description`` to its ``description``; the
    model fills one argument, ``task`` (the agent sees nothing else of the conversation).
    ``deps``: the agent's own dependencies; left out, it gets the calling run's ``deps``."""
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"agent_tool takes an Agent, got {type(agent).__name__}")
    runner = Runner(agent)

    async def run_agent(ctx: ToolContext, task: str) -> str:
        """Hand a task to the agent.

        Args:
            task: The task, in full: the agent sees nothing else of this conversation.
        """
        result = await runner.run(task, deps=ctx.deps if deps is None else deps)
        if result.outcome in ("final", "salvaged"):
            return result.output or ""
        if result.outcome == "suspended":
            raise ToolError(f"agent {agent.name!r} needs a person's decision, which a nested run cannot wait for")
        why = result.error.message if result.error is not None else f"out of budget ({result.limit})"
        raise ToolError(f"agent {agent.name!r} failed ({result.outcome}): {why}")

    words = description or agent.description or f"Ask the agent {agent.name!r} to do a task and answer with its result."
    return Tool(run_agent, name=name or agent.name, description=words)


__all__ = ["agent_tool"]
