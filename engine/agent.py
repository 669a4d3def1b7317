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
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

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
TRANSFER_TOOL = "transfer_to_agent"
HistoryPolicy: TypeAlias = Literal["shared", "isolated"]
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_.:-]*)(\??)\}")


def has_placeholders(text: str) -> bool:
    return any(m.group(1) for m in PLACEHOLDER.finditer(text))


class Agent:
    """One agent definition.

    ``instruction`` is static text (sent as a cacheable block), text with ``{key}``
    placeholders filled from the session state each pass (``{key?}`` may be missing), or a
    function of the run context returning the text (sync or async). ``static_instruction``
    is an optional cached prefix sent before a dynamic instruction.

    ``sub_agents`` makes a tree (names unique in it). An agent with somewhere to go gets a
    ``transfer_to_agent(agent_name, task)`` tool listing only the agents it may reach: its
    sub-agents, its parent and its peers (``disallow_transfer_to_parent`` /
    ``disallow_transfer_to_peers`` turn the last two off). ``history`` is what the agent sees
    after a transfer to it: ``"shared"`` — the whole conversation, other agents' turns marked
    as theirs — or ``"isolated"`` — a branch that starts from the transfer's task.
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
        sub_agents: Sequence[Agent] = (),
        disallow_transfer_to_parent: bool = False,
        disallow_transfer_to_peers: bool = False,
        history: HistoryPolicy = "shared",
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
            "disallow_transfer_to_parent": disallow_transfer_to_parent,
            "disallow_transfer_to_peers": disallow_transfer_to_peers,
            "history": history,
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
        if TRANSFER_TOOL in self.tools:
            raise ConfigurationError(
                f"agent {name!r}: the tool name {TRANSFER_TOOL!r} is reserved for transfers between agents; "
                "rename yours"
            )
        if history not in ("shared", "isolated"):
            raise ConfigurationError(f"agent {name!r}: history must be 'shared' or 'isolated', got {history!r}")
        self.tool_specs: tuple[ToolSpec, ...] = tuple(t.spec for t in self.tools.values())
        self.history: HistoryPolicy = history
        self.disallow_transfer_to_parent = disallow_transfer_to_parent
        self.disallow_transfer_to_peers = disallow_transfer_to_peers
        self.parent: Agent | None = None
        self.sub_agents: list[Agent] = []
        self._request_tools: tuple[ToolSpec, ...] | None = None
        for sub in sub_agents:
            if not isinstance(sub, Agent):
                raise ConfigurationError(f"agent {name!r}: sub_agents must be Agents, got {type(sub).__name__}")
            if sub.parent is not None:
                raise ConfigurationError(
                    f"agent {sub.name!r} is already a sub-agent of {sub.parent.name!r}; an agent has one parent "
                    f"(make another with {sub.name}.replace(name=...))"
                )
            sub.parent = self
            self.sub_agents.append(sub)
        seen: dict[str, int] = {}
        for member in self.walk():
            seen[member.name] = seen.get(member.name, 0) + 1
            member._request_tools = None  # the tree changed: transfer targets may have too
        doubles = sorted(n for n, count in seen.items() if count > 1)
        if doubles:
            raise ConfigurationError(f"agent names must be unique in a tree; these appear more than once: {doubles}")
        self.instruction_is_dynamic = callable(instruction) or has_placeholders(instruction)
        static: list[Instruction] = []
        if static_instruction:
            static.append(Instruction(text=static_instruction, cache=True))
        if isinstance(instruction, str) and instruction and not self.instruction_is_dynamic:
            static.append(Instruction(text=instruction, cache=True))
        self.static_instructions: tuple[Instruction, ...] = tuple(static)

    def replace(self, **changes: Any) -> Agent:
        """A new Agent like this one with ``changes`` applied, e.g. ``agent.replace(model=m)``
        (its sub-agents are copied too, so the new tree is independent of this one)."""
        unknown = set(changes) - {*self._options, "sub_agents"}
        if unknown:
            raise ConfigurationError(
                f"Agent.replace got unknown options {sorted(unknown)}; use {sorted(self._options)}"
            )
        changes.setdefault("sub_agents", [sub.replace() for sub in self.sub_agents])
        return Agent(**{**self._options, **changes})

    # ------------------------------------------------------------------ the agent tree

    def walk(self) -> Iterator[Agent]:
        """This agent and every agent below it, depth first."""
        yield self
        for sub in self.sub_agents:
            yield from sub.walk()

    @property
    def root(self) -> Agent:
        agent = self
        while agent.parent is not None:
            agent = agent.parent
        return agent

    def transfer_targets(self) -> list[Agent]:
        """The agents this one may transfer to: sub-agents, parent, peers (switches permitting)."""
        targets = list(self.sub_agents)
        parent = self.parent
        if parent is not None:
            if not self.disallow_transfer_to_parent:
                targets.append(parent)
            if not self.disallow_transfer_to_peers:
                targets += [peer for peer in parent.sub_agents if peer is not self]
        return targets

    @property
    def request_tools(self) -> tuple[ToolSpec, ...]:
        """The tool specs sent to the model: the agent's tools, plus ``transfer_to_agent``
        when it has somewhere to go."""
        if self._request_tools is None:
            targets = self.transfer_targets()
            self._request_tools = self.tool_specs + ((transfer_spec(targets),) if targets else ())
        return self._request_tools

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, tools={list(self.tools)})"


def transfer_spec(targets: Sequence[Agent]) -> ToolSpec:
    """The ``transfer_to_agent`` tool for an agent that may reach ``targets`` (and only them)."""
    listing = "\n".join(f"- {t.name}: {t.description or 'no description'}" for t in targets)
    return ToolSpec(
        name=TRANSFER_TOOL,
        description=(
            "Hand the conversation to another agent better suited to it. Call it alone, as the "
            f"last thing you do this turn. You may transfer to:\n{listing}"
        ),
        input_schema={
            "type": "object",
            "properties": {
                "agent_name": {
                    "type": "string",
                    "enum": [t.name for t in targets],
                    "description": "Who to hand over to.",
                },
                "task": {"type": "string", "description": "What they should do, with every detail they need."},
            },
            "required": ["agent_name", "task"],
            "additionalProperties": False,
        },
    )
