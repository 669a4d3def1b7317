"""What extension writers import (public): build your own states and rows onto an agent's machine.

``extend(agent, name=..., states=..., rows=...)`` adds states and rows to an agent's machine and
checks the result; an :class:`Extension` is the same thing as a value (states, handlers, rows,
guards, budgets) that :func:`compose` puts onto the core table. Guards are plain
``(RunState) -> bool`` functions; the core guards are here to reuse in your own rows. See
``docs/reference/extend.md`` and, for a worked example, ``docs/design.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..data.exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "Budget": "..table.budgets",
    "CORE": "..table.machine",
    "CORE_ROWS": "..table.rows",
    "Extension": "..table.machine",
    "GUARDS": "..table.guards",
    "LoopMachine": "..table.machine",
    "Row": "..table.rows",
    "Rule": "..table.rows",
    "RunContext": "loopwright",
    "RunState": "loopwright",
    "cancel_requested": "..table.guards",
    "compose": "..table.machine",
    "extend": "..machines.extend",
    "has_error": "..table.guards",
    "has_response": "..table.guards",
    "has_tool_calls": "..table.guards",
    "is_final_response": "..table.guards",
    "veto": "..machines.extend",
}

__all__ = [
    "CORE",
    "CORE_ROWS",
    "GUARDS",
    "Budget",
    "Extension",
    "LoopMachine",
    "Row",
    "Rule",
    "RunContext",
    "RunState",
    "cancel_requested",
    "compose",
    "extend",
    "has_error",
    "has_response",
    "has_tool_calls",
    "is_final_response",
    "veto",
]

if TYPE_CHECKING:
    from ..data.run_state import RunState as RunState
    from ..machines.extend import extend as extend
    from ..machines.extend import veto as veto
    from ..runtime.context import RunContext as RunContext
    from ..table.budgets import Budget as Budget
    from ..table.guards import GUARDS as GUARDS
    from ..table.guards import cancel_requested as cancel_requested
    from ..table.guards import has_error as has_error
    from ..table.guards import has_response as has_response
    from ..table.guards import has_tool_calls as has_tool_calls
    from ..table.guards import is_final_response as is_final_response
    from ..table.machine import CORE as CORE
    from ..table.machine import Extension as Extension
    from ..table.machine import LoopMachine as LoopMachine
    from ..table.machine import compose as compose
    from ..table.rows import CORE_ROWS as CORE_ROWS
    from ..table.rows import Row as Row
    from ..table.rows import Rule as Rule

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
