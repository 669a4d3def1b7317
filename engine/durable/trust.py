"""A saved run state is untrusted input: what ``Runner.resume`` checks before anything runs.

A state loaded from JSON (or from a store) may have been edited, truncated or forged. Its
budgets never come from it (the runner takes them from the agent); and before a resumed run
takes a step, :func:`check_saved_state` refuses, with a :class:`ResumeError` naming the field:

- negative counters (``seq``, ``iteration``, ``attempt``, ``tool_calls_made``, the token counts,
  the engine's ``charges``, the turn's start counters), and charges of budgets the machine
  does not have;
- a state the machine does not have, a trace that does not end in it, an active agent that is
  not in the tree;
- for a run waiting on tool calls: no latest reply, or a history whose last turn is not that
  reply; a pending request whose call is not one of the reply's calls, names another tool or
  carries other arguments (what runs is what the person was shown; a call of an ``agent_tool``
  shows its nested run's calls, each with a compound id ``<call>/<nested request>`` and the tool
  ``agent.tool`` with that call's arguments, which the decision takes down with it: a compound
  id its nested run does not wait on, another tool or kind, or a nested saved run that would
  not pass these checks itself is refused); a held step of the wrong length, or an answer for a
  call that still waits.

For states that leave the server, ``RunState.to_json(key=...)`` signs (HMAC-SHA256) and
``RunState.from_json(data, key=...)`` checks the signature (:mod:`loopwright.data.signing`).
"""

from __future__ import annotations

from typing import Any

from ..data.errors import ResumeError
from ..data.events import ToolCall
from ..data.run_state import RunState
from ..runtime.approvals import hands_down, owner
from ..table.machine import LoopMachine

_COUNTERS = ("seq", "iteration", "attempt", "tool_calls_made")


def check_saved_state(rs: RunState, machine: LoopMachine, agents: Any) -> None:
    """Raise :class:`ResumeError` naming the first thing wrong with ``rs`` (see the module docstring)."""
    where = f"saved run {rs.run_id!r}"
    _check_counters(rs, machine, where)
    if rs.stage not in machine.states:
        raise ResumeError(f"{where}: its state {rs.stage!r} is not a state of this agent's machine")
    if not rs.trace or rs.trace[-1] != rs.stage:
        raise ResumeError(f"{where}: its trace does not end in its state {rs.stage!r}")
    if rs.active_agent not in agents:
        raise ResumeError(f"{where}: its active agent {rs.active_agent!r} is not in this runner's tree")
    held = rs.features.get("waiting")
    if held is not None and (held.pending or held.step):
        _check_held_step(rs, held, where, agents[rs.active_agent].tools)


def _negative(where: str, name: str, value: float) -> ResumeError:
    return ResumeError(f"{where}: {name} is {value}; a counter cannot be negative")


def _check_counters(rs: RunState, machine: LoopMachine, where: str) -> None:
    counters = {name: getattr(rs, name) for name in _COUNTERS}
    counters.update({f"usage.{k}": v for k, v in rs.usage.model_dump().items() if isinstance(v, int | float)})
    counters.update({f"turn_start[{k!r}]": v for k, v in rs.turn_start.items()})
    counters.update({f"charges[{k!r}]": v for k, v in rs.charges.items()})
    for name, value in counters.items():
        if value < 0:
            raise _negative(where, name, value)
    for budget in rs.charges:
        if budget not in machine.budgets:
            raise ResumeError(f"{where}: charges name the budget {budget!r}, which this agent's machine does not have")


def _check_held_step(rs: RunState, held: Any, where: str, tools: Any) -> None:
    response = rs.response
    if response is None:
        raise ResumeError(f"{where}: it waits on tool calls but holds no model reply (response is null)")
    calls = [p for p in response.parts if type(p) is ToolCall]
    last = rs.messages[-1] if rs.messages else None
    if last is None or last.role != "assistant" or tuple(last.parts) != tuple(response.parts):
        raise ResumeError(f"{where}: the last turn of its history is not the reply whose calls wait")
    if len(held.step) != len(calls):
        raise ResumeError(f"{where}: the held step has {len(held.step)} answers for {len(calls)} calls")
    by_id = {call.id: (i, call) for i, call in enumerate(calls)}
    for request in held.pending:
        _check_request(rs, request, by_id, held, where, tools)
    for i, answered in enumerate(held.step):
        if answered is not None and answered.call_id != calls[i].id:
            raise ResumeError(f"{where}: answer {i} of the held step is for {answered.call_id!r}, not {calls[i].id!r}")


def _check_request(
    rs: RunState, request: Any, by_id: dict[str, tuple[int, ToolCall]], held: Any, where: str, tools: Any
) -> None:
    """A pending request must be one of the reply's calls, as shown: same tool, same arguments
    (or, for a tool that runs an agent, one of its nested run's calls: ``call/inner``, ``tool.inner``)."""
    found = by_id.get(owner(request.call_id, by_id) or "")
    pending = f"{where}: pending call {request.call_id!r}"
    if found is None:
        raise ResumeError(f"{pending} is not one of the reply's calls")
    i, call = found
    down = hands_down(tools.get(call.name))
    if request.call_id != call.id:
        if down is None or not request.tool.startswith(f"{call.name}."):
            raise ResumeError(f"{pending} is not one of the reply's calls (its call {call.id!r} runs no agent)")
        problem = down.shown_problem(request, rs)
        if problem is not None:
            raise ResumeError(f"{pending} ({request.tool}) is not what the call's agent waits on: {problem}")
    elif request.tool != call.name:
        raise ResumeError(f"{pending} shows tool {request.tool!r} but the reply calls {call.name!r}")
    elif request.args != call.args:
        raise ResumeError(
            f"{pending} ({call.name}) shows arguments {request.args} but the reply's call has {call.args}; "
            "what runs must be what was shown"
        )
    if held.step[i] is not None:
        raise ResumeError(f"{pending} both waits and has an answer")
