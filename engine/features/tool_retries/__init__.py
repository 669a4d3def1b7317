"""tool_retries: tools that may be tried again (``@tool(retries=N, retry_on=...)``).

An agent with such a tool runs on the core composed with this feature. It adds:

- its slice :class:`~loopwright.features.tool_retries.retries.ToolRetries` (retries granted and
  refused, each tool's streak), kept by its ``retry`` hook, which act's calls ask when a tool
  with retries fails (:mod:`.retries`: a tool that raised ``RetryTool`` or got arguments that
  did not validate is answered "fix this and call again"; one that raised an exception of its
  ``retry_on`` is called again by act after a backoff; each retry a ``tool_retried`` event);
- its budget ``max_tool_retries`` (the run's retries of tool calls) and the guard
  ``within_tool_retry_budget``, required in front of ``decide -> preprocess``: once a retry was
  asked past the budget, the run can no longer go round, so it takes ``decide -> salvage`` with
  ``RunResult.limit == "max_tool_retries"`` (or ends with outcome ``"limit"`` when salvage is off).
"""

from __future__ import annotations

from loopwright.runtime.agent import Agent
from loopwright.table.budgets import Budget
from loopwright.table.machine import DECIDE, PRE, Extension

from .retries import NAME, ToolRetries, retries_asked, retry

TOOL_RETRY_BUDGET = Budget(
    "max_tool_retries",
    "retries of tool calls (max_tool_retries={value})",
    "within_tool_retry_budget",
    used=retries_asked,
    inclusive=True,
)
"""Room while the retries asked are at most the cap: the one past it is refused, and ends the loop."""
within_tool_retry_budget = TOOL_RETRY_BUDGET.guard


def has_tools_that_retry(agent: Agent) -> bool:
    """Some agent of the tree has a tool of ``retries=N`` (N > 0)."""
    return any(t.retries for a in agent.walk() for t in a.tools.values())


TOOL_RETRIES = Extension(
    name=NAME,
    applies_to=has_tools_that_retry,
    require={(DECIDE, PRE): (within_tool_retry_budget,)},
    budgets=[TOOL_RETRY_BUDGET],
    guards={"within_tool_retry_budget": within_tool_retry_budget},
    slice=ToolRetries,
    retry=retry,
)
"""Tools tried again, within a budget: the slice act's calls keep and the guard that stops the loop."""
