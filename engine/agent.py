"""Agent: the definition of one agent (model, instruction, tools, limits, callbacks).

An Agent is configuration, shared by all its runs; a run's own data lives in its RunState.

Callbacks, in the order they run (each may be sync or async):

1. ``before_model(request, ctx)`` -> None, a replacement ModelRequest, or a ModelResponse
   (which skips the model call);
2. ``after_model(response, ctx)`` -> None or a replacement ModelResponse;
3. ``before_tool(call, ctx)`` -> None, or a value that is used as the tool's result (the tool
   is not called);
4. ``after_tool(call, result, ctx)`` -> None or a replacement ToolResult.

A callback that raises is not swallowed: a model callback fails the run with its error, a tool
callback turns that call's result into an error result naming the callback.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from .errors import ConfigurationError
from .events import Instruction, ModelRequest, ModelResponse, ToolCall, ToolResult, ToolSpec
from .limits import Limits
from .models.base import Model
from .run_state import RunContext
from .tools import Tool, as_tool

if TYPE_CHECKING:
    from .machine import LoopMachine

InstructionProvider: TypeAlias = Callable[[RunContext], "str | Awaitable[str]"]
BeforeModel: TypeAlias = Callable[
    [ModelRequest, RunContext], "ModelRequest | ModelResponse | Awaitable[ModelRequest | ModelResponse | None] | None"
]
AfterModel: TypeAlias = Callable[[ModelResponse, RunContext], "ModelResponse | Awaitable[ModelResponse | None] | None"]
BeforeTool: TypeAlias = Callable[[ToolCall, RunContext], Any]
AfterTool: TypeAlias = Callable[[ToolCall, ToolResult, RunContext], "ToolResult | Awaitable[ToolResult | None] | None"]

_AGENT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_.:-]*)(\??)\}")


def has_placeholders(text: str) -> bool:
    return any(m.group(1) for m in PLACEHOLDER.finditer(text))


class Agent:
    """One agent definition.

    ``instruction`` is static text (sent as a cacheable block), text with ``{key}``
    placeholders filled from the session state each pass (``{key?}`` may be missing), or a
    function of the run context returning the text (sync or async). ``static_instruction``
    is an optional cached prefix sent before a dynamic instruction.
    """

    def __init__(
        self,
        *,
        name: str,
        model: Model,
        instruction: str | InstructionProvider = "",
        static_instruction: str | None = None,
        description: str = "",
        tools: Sequence[Tool | Callable[..., Any]] = (),
        limits: Limits | None = None,
        model_settings: dict[str, Any] | None = None,
        before_model: BeforeModel | None = None,
        after_model: AfterModel | None = None,
        before_tool: BeforeTool | None = None,
        after_tool: AfterTool | None = None,
        machine: LoopMachine | None = None,
    ) -> None:
        if not isinstance(name, str) or not _AGENT_NAME.match(name):
            raise ConfigurationError(
                f"agent name {name!r} is not allowed: use letters, digits, '_' or '-', not starting with a digit"
            )
        if not isinstance(model, Model):
            raise ConfigurationError(
                f"agent {name!r}: model {model!r} has no `async def complete(request)`; pass a "
                "ScriptedModel, an AnthropicModel, or any object with that method"
            )
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigurationError(f"agent {name!r}: limits must be a loopwright.Limits, got {type(limits).__name__}")
        if not (isinstance(instruction, str) or callable(instruction)):
            raise ConfigurationError(f"agent {name!r}: instruction must be a str or a function of the run context")
        self._options: dict[str, Any] = {
            "name": name,
            "model": model,
            "instruction": instruction,
            "static_instruction": static_instruction,
            "description": description,
            "tools": tools,
            "limits": limits,
            "model_settings": model_settings,
            "before_model": before_model,
            "after_model": after_model,
            "before_tool": before_tool,
            "after_tool": after_tool,
            "machine": machine,
        }
        self.name = name
        self.model = model
        self.instruction = instruction
        self.static_instruction = static_instruction
        self.description = description
        self.limits = limits or Limits()
        self.model_settings = dict(model_settings or {})
        self.before_model = before_model
        self.after_model = after_model
        self.before_tool = before_tool
        self.after_tool = after_tool
        self.machine = machine
        self.tools: dict[str, Tool] = {}
        for item in tools:
            t = as_tool(item)
            if t.name in self.tools:
                raise ConfigurationError(
                    f"agent {name!r} has two tools named {t.name!r}; give one another name with @tool(name=...)"
                )
            self.tools[t.name] = t
        self.tool_specs: tuple[ToolSpec, ...] = tuple(t.spec for t in self.tools.values())
        self.instruction_is_dynamic = callable(instruction) or has_placeholders(instruction)
        static: list[Instruction] = []
        if static_instruction:
            static.append(Instruction(text=static_instruction, cache=True))
        if isinstance(instruction, str) and instruction and not self.instruction_is_dynamic:
            static.append(Instruction(text=instruction, cache=True))
        self.static_instructions: tuple[Instruction, ...] = tuple(static)

    def replace(self, **changes: Any) -> Agent:
        """A new Agent like this one with ``changes`` applied, e.g. ``agent.replace(model=m)``."""
        unknown = set(changes) - set(self._options)
        if unknown:
            raise ConfigurationError(
                f"Agent.replace got unknown options {sorted(unknown)}; use {sorted(self._options)}"
            )
        return Agent(**{**self._options, **changes})

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, tools={list(self.tools)})"
