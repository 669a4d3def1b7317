"""preprocess: builds the ModelRequest for this pass.

Reads the active agent's instructions, tool specs (as its ``prepare_tools`` chooses them, if it
has one) and settings, ``state`` (for ``{key}``
placeholders) and ``messages``; hands the request through the features' request processors
(a multi-agent run shows each agent the history as it sees it, and adds ``transfer_to_agent``);
writes ``request``, resets ``attempt`` (a new pass begins), and on a bad instruction writes
``error`` (the table then goes to ``failed``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Mapping, Sequence

from loopwright.data.errors import InstructionError
from loopwright.data.events import ErrorInfo, History, Instruction, ModelRequest, ToolSpec, trusted
from loopwright.data.run_state import RunState
from loopwright.runtime.agent import PLACEHOLDER, Agent
from loopwright.runtime.context import RunContext
from loopwright.runtime.tools import Tool
from loopwright.runtime.toolsets import strict_default


def _fill_placeholders(text: str, state: Mapping[str, object], agent: str) -> str:
    """Replace ``{key}`` with ``state[key]`` (``{key?}`` may be missing; ``{{``/``}}`` are
    literal braces). A missing required key raises InstructionError naming it."""

    def substitute(m: re.Match[str]) -> str:
        token = m.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        key, optional = m.group(1), m.group(2)
        if key in state:
            return str(state[key])
        if optional:
            return ""
        known = ", ".join(sorted(state)) or "none"
        raise InstructionError(
            f"agent {agent!r}: the instruction's placeholder {{{key}}} names session state key "
            f"{key!r}, which is not set (keys set: {known}); pass state={{{key!r}: ...}} to "
            f"run(), set it from a tool via ctx.state, or write {{{key}?}} if it may be missing"
        )

    return PLACEHOLDER.sub(substitute, text)


async def _render_instruction(agent: Agent, ctx: RunContext) -> str:
    """The dynamic instruction for this pass."""
    instruction = agent.instruction
    if isinstance(instruction, str):
        return _fill_placeholders(instruction, ctx.state, agent.name)
    text = instruction(ctx)
    if inspect.isawaitable(text):
        text = await text
    if not isinstance(text, str):
        raise TypeError(f"the instruction function returned {type(text).__name__}, not str")
    return text


def preprocess(rs: RunState, ctx: RunContext) -> Awaitable[None] | None:
    """A plain function: only a dynamic instruction or ``prepare_tools`` makes it wait (it then
    returns the coroutine that renders and prepares them and builds the request)."""
    agent = ctx.agent
    rs.attempt = 0
    if agent.preprocess_waits:
        return _with_dynamic_parts(rs, ctx, agent)
    _build_request(rs, ctx, agent.static_instructions, agent.tool_specs)
    return None


async def _with_dynamic_parts(rs: RunState, ctx: RunContext, agent: Agent) -> None:
    instructions = agent.static_instructions
    if agent.instruction_is_dynamic:
        try:
            text = await _render_instruction(agent, ctx)
        except InstructionError as exc:
            rs.error = ErrorInfo(kind="instruction", message=str(exc))
            return
        except Exception as exc:
            rs.error = ErrorInfo(
                kind="instruction",
                message=f"agent {agent.name!r}: the instruction function raised {type(exc).__name__}: {exc}",
            )
            return
        if text:
            instructions = (*instructions, trusted(Instruction, text=text, cache=False))
    tools = agent.tool_specs
    if agent.prepare_tools is not None:
        try:
            tools = await _prepared_tools(agent, ctx)
        except _NotPrepared as exc:
            rs.error = ErrorInfo(kind="prepare_tools", message=str(exc))
            return
    _build_request(rs, ctx, instructions, tools)


class _NotPrepared(Exception):
    """prepare_tools raised, or returned something that is not a choice of the agent's tools."""


async def _prepared_tools(agent: Agent, ctx: RunContext) -> tuple[ToolSpec, ...]:
    """The tool specs ``agent.prepare_tools`` offers for this pass (each one of the agent's tools)."""
    where = f"agent {agent.name!r}: prepare_tools"
    try:
        chosen = agent.prepare_tools(ctx, agent.tool_specs)  # type: ignore[misc]
        if inspect.isawaitable(chosen):
            chosen = await chosen
    except Exception as exc:
        raise _NotPrepared(f"{where} raised {type(exc).__name__}: {exc}") from exc
    if chosen is agent.tool_specs:
        return chosen
    if isinstance(chosen, str | bytes) or not isinstance(chosen, Sequence | set | frozenset):
        raise _NotPrepared(f"{where} returned {type(chosen).__name__}; return a list of the tool specs to offer")
    specs: list[ToolSpec] = []
    for item in chosen:
        spec = item.spec if isinstance(item, Tool) else item
        if not isinstance(spec, ToolSpec):
            raise _NotPrepared(f"{where} returned {item!r} among the tools; return ToolSpecs (or Tools) of the agent")
        if spec.name not in agent.tools:
            raise _NotPrepared(
                f"{where} offered {spec.name!r}, which is not one of the agent's tools "
                f"({', '.join(agent.tools) or 'none'}); give the tool to the agent and choose among them here"
            )
        specs.append(spec)
    return strict_default(specs, agent.tool_specs) if agent.strict_tools else tuple(specs)


def _build_request(
    rs: RunState, ctx: RunContext, instructions: tuple[Instruction, ...], tools: tuple[ToolSpec, ...]
) -> None:
    request = trusted(
        ModelRequest,
        instructions=instructions,
        messages=History(rs.messages),
        tools=tools,
        tool_choice=None,
        settings=ctx.agent.model_settings,
        tokens_left=None if (cap := rs.limits.max_total_tokens) is None else cap - rs.usage.total_tokens,
        output_schema=None,
    )
    for process in ctx.request_hooks:
        request = process(request=request, rs=rs, ctx=ctx)
    rs.request = request
