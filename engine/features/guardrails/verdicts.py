"""Guards and their verdicts: what a guard is (a function, an Agent, a :class:`Guardrail`), what
it may say (allow, :class:`Rewrite`, :class:`Block`), and running one (an agent as a nested run
of the guarded one). The states that run them are in :mod:`loopwright.features.guardrails`."""

from __future__ import annotations

import inspect
import json
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from loopwright.data.errors import ConfigurationError
from loopwright.data.events import ToolCall, ToolResult
from loopwright.runtime.agent import Agent
from loopwright.runtime.context import RunContext
from loopwright.runtime.nesting import enter_tools, leave_tools, link

MAX_GUARD_RETRIES = 10
"""The most retries an output guard may ask for (``Guardrail(retries=...)``), and the cap of the
``max_guard_retries`` budget that bounds the retry row."""


@dataclass(frozen=True, slots=True)
class Block:
    """A guard's verdict: stop here, saying why."""

    message: str = "blocked by a guard"


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A guard's verdict: go on with ``value`` instead (the user's text, the answer's text, a
    call's arguments as a dict, or a tool result's content)."""

    value: Any


class GuardVerdict(BaseModel):
    """What an agent used as a guard answers (its ``output_type``)."""

    allow: bool
    message: str = ""


Verdict = Block | Rewrite | None


@dataclass(frozen=True, eq=False)
class Guardrail:
    """A guard with options. ``check`` is a function ``(value, ctx) -> verdict`` (sync or async)
    or an Agent; ``name`` defaults to its name. ``parallel`` (input guards): run while the first
    model call is made, cancelling it on a block. ``retries`` (output guards): on a block, send
    the message back to the model at most this many times before the run ends blocked.
    ``after`` (tool guards): check the call's result instead of the call. ``halt`` (tool
    guards): a block ends the run (False: only the call is refused; the model reads why)."""

    check: Any
    name: str = ""
    parallel: bool = False
    retries: int = 0
    after: bool = False
    halt: bool = True

    def __post_init__(self) -> None:
        if not (callable(self.check) or isinstance(self.check, Agent)):
            raise ConfigurationError(
                f"Guardrail: check must be a function (value, ctx) or an Agent, got {self.check!r}"
            )
        if not isinstance(self.retries, int) or not 0 <= self.retries <= MAX_GUARD_RETRIES:
            raise ConfigurationError(
                f"Guardrail(retries={self.retries!r}): give a whole number from 0 to {MAX_GUARD_RETRIES}"
            )
        if not self.name:
            named = self.check.name if isinstance(self.check, Agent) else getattr(self.check, "__name__", "")
            object.__setattr__(self, "name", named or type(self.check).__name__)


def guards_of(given: Sequence[Any]) -> tuple[Guardrail, ...]:
    """An agent's guard option as Guardrail values."""
    return tuple(g if isinstance(g, Guardrail) else Guardrail(g) for g in given)


def check_guards(agent: Agent) -> None:
    """Each option used where it means something (ConfigurationError naming it otherwise)."""
    for option, allowed in (("input_guards", "parallel"), ("output_guards", "retries"), ("tool_guards", "after/halt")):
        for g in guards_of(getattr(agent, option)):
            wrong = [
                name
                for name, value, default in (
                    ("parallel", g.parallel, False),
                    ("retries", g.retries, 0),
                    ("after", g.after, False),
                    ("halt", g.halt, True),
                )
                if value != default and name not in allowed
            ]
            if wrong:
                raise ConfigurationError(
                    f"agent {agent.name!r}: guard {g.name!r} in {option} sets {', '.join(wrong)}, which only "
                    f"{_OWNER[wrong[0]]} take; {option} take {allowed}"
                )


_OWNER = {"parallel": "input guards", "retries": "output guards", "after": "tool guards", "halt": "tool guards"}


def guarded(agent: Agent) -> bool:
    """Some agent of ``agent``'s tree has guards (its machine then has this feature)."""
    found = False
    for a in agent.walk():
        if a.input_guards or a.output_guards or a.tool_guards:
            check_guards(a)
            found = True
    return found


_NESTED: list[Callable[[Agent], Callable[[str], Awaitable[Any]]]] = []
_RUNS: weakref.WeakKeyDictionary[Agent, Callable[[str], Awaitable[Any]]] = weakref.WeakKeyDictionary()


def run_agents_with(factory: Callable[[Agent], Callable[[str], Awaitable[Any]]]) -> None:
    """How an agent used as a guard is run: ``factory(agent)`` gives ``run(text) -> RunResult``
    (the runner's floor registers ``Runner(agent).run``: this floor cannot import it)."""
    _NESTED[:] = [factory]


def as_text(value: Any) -> str:
    """What an agent used as a guard reads."""
    if isinstance(value, ToolCall):
        return f"A call of the tool {value.name!r} with the arguments {json.dumps(value.args, default=str)}"
    if isinstance(value, ToolResult):
        return f"The result of the tool {value.name!r}: {json.dumps(value.content, default=str)}"
    return str(value)


async def ask_agent(agent: Agent, value: Any, ctx: RunContext) -> Verdict:
    """Run ``agent`` on ``value`` as a child of the guarded run (it charges its budgets)."""
    run = _RUNS.get(agent)
    if run is None:
        if not _NESTED:
            raise ConfigurationError("agents as guards need loopwright's runner: import loopwright.loop.runner")
        checker = agent if agent.output_type is GuardVerdict else agent.replace(output_type=GuardVerdict)
        run = _RUNS[agent] = _NESTED[0](checker)
    token = enter_tools(link(ctx.run_state))
    try:
        answer = await run(as_text(value))
    finally:
        leave_tools(token)
    said = answer.output
    if answer.outcome != "final" or not isinstance(said, GuardVerdict):
        why = answer.error.message if answer.error is not None else answer.outcome
        return Block(f"the guard agent {agent.name!r} gave no verdict ({why})")
    return None if said.allow else Block(said.message or f"the guard agent {agent.name!r} said no")


async def verdict(guard: Guardrail, value: Any, ctx: RunContext) -> Verdict:
    """What ``guard`` says of ``value``: None (allow), a Rewrite or a Block. A guard that raises,
    or returns something else, blocks (named in the message)."""
    try:
        if isinstance(guard.check, Agent):
            return await ask_agent(guard.check, value, ctx)
        said = guard.check(value, ctx)
        if inspect.isawaitable(said):
            said = await said
    except Exception as exc:
        return Block(f"the guard {guard.name!r} raised {type(exc).__name__}: {exc}")
    if said is None or said is True:
        return None
    if said is False:
        return Block(f"the guard {guard.name!r} said no")
    if isinstance(said, Block | Rewrite):
        return said
    return Block(
        f"the guard {guard.name!r} returned {type(said).__name__}; return None, True, False, Block(message) "
        "or Rewrite(value)"
    )
