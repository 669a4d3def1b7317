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
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel

from ..data.errors import ConfigurationError
from ..data.events import Instruction, ModelRequest, ModelResponse, ToolCall, ToolResult, ToolSpec
from ..data.limits import Limits
from ..models.base import Model
from .tools import Tool, as_tool
from .toolsets import LiveSpecs, LiveTools, Toolset, is_toolset

RunContext: TypeAlias = Any
"""The run context (``loopwright.RunContext``, a higher layer: this module does not import it)."""
Extension: TypeAlias = Any
"""A ``loopwright.extend.Extension`` (a higher layer: this module does not import it)."""
LoopMachine: TypeAlias = Any
"""A ``loopwright.extend.LoopMachine`` (a higher layer: this module does not import it)."""

InstructionProvider: TypeAlias = Callable[[RunContext], "str | Awaitable[str]"]
BeforeModel: TypeAlias = Callable[
    [ModelRequest, RunContext],
    "ModelRequest | ModelResponse | Awaitable[ModelRequest | ModelResponse | None] | None",
]
AfterModel: TypeAlias = Callable[[ModelResponse, RunContext], "ModelResponse | Awaitable[ModelResponse | None] | None"]
BeforeTool: TypeAlias = Callable[[ToolCall, RunContext], Any]
AfterTool: TypeAlias = Callable[[ToolCall, ToolResult, RunContext], "ToolResult | Awaitable[ToolResult | None] | None"]
PrepareTools: TypeAlias = Callable[
    [RunContext, tuple[ToolSpec, ...]], "Sequence[ToolSpec | Tool] | Awaitable[Sequence[ToolSpec | Tool]]"
]
"""``prepare_tools(ctx, specs) -> specs``: the tools offered in this pass's request (a subset of
the agent's, their specs edited if you like); the model may call only those."""

_AGENT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
TRANSFER_TOOL = "transfer_to_agent"
HistoryPolicy: TypeAlias = Literal["shared", "isolated"]
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_.:-]*)(\??)\}")


def has_placeholders(text: str) -> bool:
    return any(m.group(1) for m in PLACEHOLDER.finditer(text))


class Agent:
    """One agent definition: a value. Once made it does not change (``replace()`` makes a
    variant); a tree of agents is a value too, and the same agent may sit in several trees.

    ``instruction`` is static text (sent as a cacheable block), text with ``{key}``
    placeholders filled from the session state each pass (``{key?}`` may be missing), or a
    function of the run context returning the text (sync or async). ``static_instruction``
    is an optional cached prefix sent before a dynamic instruction.

    ``limits``: a root agent's limits bound the whole run; a sub-agent's own limits bound its
    turn while it is the active agent (see :class:`~loopwright.Limits`).

    ``sub_agents`` makes a tree (names unique in it). An agent with somewhere to go gets a
    ``transfer_to_agent(agent_name, task)`` tool listing only the agents it may reach: its
    sub-agents, its parent and its peers (``disallow_transfer_to_parent`` /
    ``disallow_transfer_to_peers`` turn the last two off). ``history`` is what the agent sees
    after a transfer to it: ``"shared"`` — the whole conversation, other agents' turns marked
    as theirs — or ``"isolated"`` — a branch that starts from the transfer's task.

    ``output_type`` (a pydantic model class) asks for a structured final answer: the reply must
    validate against it (a reply that does not goes back to the model with the validation error,
    at most ``Limits.max_parse_retries`` times) and ``RunResult.output`` is the validated object.
    ``planner`` (``loopwright.features.PlanReAct()``) asks the model to plan, reason and answer
    under tags; only the final answer is visible; ``loopwright.features.Planner()`` keeps a
    structured plan, written first and updated after each act. ``observer``
    (``loopwright.features.Observer(every=3)``) looks at the recent steps every few passes and
    may add a correction. ``compaction`` (``loopwright.features.Compaction(max_tokens=...)``)
    replaces older turns by a summary once the history passes a token threshold.

    ``prepare_tools(ctx, tools)`` (sync or async) chooses the tools offered in each pass's
    request: it gets the agent's tool specs and returns those to offer (a subset; a spec may be
    edited, e.g. ``spec.model_copy(update={"description": ...})``); a call to a tool not
    offered is answered with an error naming the offered ones, and not run.

    ``strict_tools=True`` makes strict tool use (``@tool(strict=...)``) every tool's default: the
    provider holds the model's arguments to each tool's schema exactly.

    ``fallback_models`` are models to switch to, in order, when a model call fails for good:
    its retries spent on a retryable error (429, 5xx, a timeout, a connection error), or an
    error ``fallback_on`` lists (HTTP statuses such as ``404``, or exception classes such as
    ``loopwright.ModelError``). The run takes the bounded row ``reason -> reason
    [has_failed_model & fallback_left]`` (at most ``Limits.max_fallbacks`` times), stays on the
    new model from then on, and says so (a ``model_switched`` event, ``RunResult.models_used``).

    ``input_guards``, ``output_guards`` and ``tool_guards`` check the user's message, the final
    answer and each tool call (functions, agents, or ``loopwright.features.Guardrail`` values):
    each may allow, rewrite or block (``loopwright.features.guardrails``).

    ``extensions`` adds the user's own states and rows (:class:`~loopwright.table.machine.Extension`,
    or what :func:`~loopwright.extend` makes) to the machine this agent runs on; ``machine``
    names a machine built with :func:`~loopwright.extend` (its extensions are used the same way).
    """

    name: str
    model: Model
    fallback_models: tuple[Model, ...]
    fallback_on: tuple[int | type[BaseException], ...]
    models: tuple[Model, ...]
    """``model`` then ``fallback_models``: the models a run of this agent may call, in order."""
    instruction: str | InstructionProvider
    static_instruction: str | None
    description: str
    tools: Mapping[str, Tool]
    limits: Limits
    own_limits: Limits | None
    """The limits given to this agent (None: the defaults, and for a sub-agent: only the run's)."""
    model_settings: dict[str, Any]
    before_model: BeforeModel | None
    after_model: AfterModel | None
    before_tool: BeforeTool | None
    after_tool: AfterTool | None
    machine: LoopMachine | None
    extensions: tuple[Extension, ...]
    sub_agents: tuple[Agent, ...]
    disallow_transfer_to_parent: bool
    disallow_transfer_to_peers: bool
    history: HistoryPolicy
    output_type: type[BaseModel] | None
    planner: Any
    observer: Any
    compaction: Any
    input_guards: tuple[Any, ...]
    output_guards: tuple[Any, ...]
    tool_guards: tuple[Any, ...]
    toolsets: tuple[Toolset, ...]
    """The toolsets among ``tools`` (their tools are in ``tools`` once listed: :mod:`.toolsets`)."""
    tool_specs = LiveSpecs()  # an agent without toolsets holds its own tuple (set in __init__)
    instruction_is_dynamic: bool
    prepare_tools: PrepareTools | None
    strict_tools: bool
    """Every tool the model is offered is strict unless the tool says otherwise."""
    preprocess_waits: bool
    """Preprocess awaits something each pass: a dynamic instruction or ``prepare_tools``."""
    static_instructions: tuple[Instruction, ...]

    def __init__(
        self,
        *,
        name: str,
        model: Model,
        instruction: str | InstructionProvider = "",
        static_instruction: str | None = None,
        description: str = "",
        tools: Sequence[Tool | Callable[..., Any] | Toolset] = (),
        limits: Limits | None = None,
        model_settings: Mapping[str, Any] | None = None,
        before_model: BeforeModel | None = None,
        after_model: AfterModel | None = None,
        before_tool: BeforeTool | None = None,
        after_tool: AfterTool | None = None,
        machine: LoopMachine | None = None,
        extensions: Sequence[Extension] = (),
        sub_agents: Sequence[Agent] = (),
        disallow_transfer_to_parent: bool = False,
        disallow_transfer_to_peers: bool = False,
        history: HistoryPolicy = "shared",
        output_type: type[BaseModel] | None = None,
        planner: Any = None,
        observer: Any = None,
        compaction: Any = None,
        prepare_tools: PrepareTools | None = None,
        strict_tools: bool = False,
        fallback_models: Sequence[Model] = (),
        fallback_on: Collection[int | type[BaseException]] = (),
        input_guards: Sequence[Any] = (),
        output_guards: Sequence[Any] = (),
        tool_guards: Sequence[Any] = (),
    ) -> None:
        _check_options(name, model, limits, instruction, history)
        if prepare_tools is not None and not callable(prepare_tools):
            raise ConfigurationError(
                f"agent {name!r}: prepare_tools must be a function (ctx, tools) -> tools, got {prepare_tools!r}"
            )
        fallback_models, fallback_on = _check_fallbacks(name, fallback_models, fallback_on)
        _check_features(name, output_type, planner, observer, compaction)
        guards = {"input_guards": input_guards, "output_guards": output_guards, "tool_guards": tool_guards}
        _check_guards(name, guards)
        own = object.__setattr__
        own(self, "_options", {
            "name": name, "model": model, "instruction": instruction, "static_instruction": static_instruction,
            "description": description, "tools": tools, "limits": limits, "model_settings": model_settings,
            "before_model": before_model, "after_model": after_model, "before_tool": before_tool,
            "after_tool": after_tool, "machine": machine, "extensions": extensions, "sub_agents": sub_agents,
            "disallow_transfer_to_parent": disallow_transfer_to_parent,
            "disallow_transfer_to_peers": disallow_transfer_to_peers, "history": history,
            "output_type": output_type, "planner": planner, "observer": observer,
            "compaction": compaction, "prepare_tools": prepare_tools, "strict_tools": strict_tools,
            "fallback_models": fallback_models, "fallback_on": fallback_on, **guards,
        })  # fmt: skip
        toolsets = tuple(t for t in tools if is_toolset(t))
        tool_map = _tool_map(name, [t for t in tools if not is_toolset(t)] if toolsets else tools)
        subs = tuple(sub_agents)
        for sub in subs:
            if not isinstance(sub, Agent):
                raise ConfigurationError(f"agent {name!r}: sub_agents must be Agents, got {type(sub).__name__}")
        dynamic = callable(instruction) or has_placeholders(instruction)
        static: list[Instruction] = []
        if static_instruction:
            static.append(Instruction(text=static_instruction, cache=True))
        if isinstance(instruction, str) and instruction and not dynamic:
            static.append(Instruction(text=instruction, cache=True))
        for key, value in {
            "name": name, "model": model, "instruction": instruction, "static_instruction": static_instruction,
            "description": description, "limits": limits or Limits(), "toolsets": toolsets,
            "tools": LiveTools(name, tool_map, toolsets, strict=strict_tools) if toolsets
            else MappingProxyType(tool_map),
            "own_limits": limits, "model_settings": dict(model_settings or {}), "before_model": before_model,
            "after_model": after_model, "before_tool": before_tool, "after_tool": after_tool, "machine": machine,
            "extensions": tuple(extensions), "sub_agents": subs,
            "disallow_transfer_to_parent": disallow_transfer_to_parent,
            "disallow_transfer_to_peers": disallow_transfer_to_peers, "history": history,
            "output_type": output_type, "planner": planner, "observer": observer,
            "compaction": compaction, **{k: tuple(v) for k, v in guards.items()},
            "tool_specs": _strict_default(tool_map.values(), strict_tools), "instruction_is_dynamic": dynamic,
            "prepare_tools": prepare_tools, "strict_tools": strict_tools,
            "preprocess_waits": dynamic or prepare_tools is not None,
            "static_instructions": tuple(static), "fallback_models": fallback_models,
            "fallback_on": fallback_on, "models": (model, *fallback_models),
        }.items():  # fmt: skip
            if not (key == "tool_specs" and toolsets):  # (with toolsets: LiveSpecs, read live)
                own(self, key, value)
        doubles = sorted(n for n, count in Counter(a.name for a in self.walk()).items() if count > 1)
        if doubles:
            raise ConfigurationError(f"agent names must be unique in a tree; these appear more than once: {doubles}")

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"an Agent is a value and does not change: make a variant with agent.replace({key}=...)")

    def __delattr__(self, key: str) -> None:
        raise AttributeError("an Agent is a value and does not change")

    def replace(self, **changes: Any) -> Agent:
        """A new Agent like this one with ``changes`` applied, e.g. ``agent.replace(model=m)``."""
        unknown = set(changes) - set(self._options)
        if unknown:
            raise ConfigurationError(
                f"Agent.replace got unknown options {sorted(unknown)}; use {sorted(self._options)}"
            )
        return Agent(**{**self._options, **changes})

    def walk(self) -> Iterator[Agent]:
        """This agent and every agent below it, depth first."""
        yield self
        for sub in self.sub_agents:
            yield from sub.walk()

    def __repr__(self) -> str:
        return f"Agent(name={self.name!r}, tools={list(self.tools)})"

    _options: dict[str, Any]


def _strict_default(tools: Iterable[Tool], strict: bool) -> tuple[ToolSpec, ...]:
    """The tools' specs, ``strict`` filled in where a tool left it open."""
    if not strict:
        return tuple(t.spec for t in tools)
    return tuple(t.spec if t.spec.strict is not None else t.spec.model_copy(update={"strict": True}) for t in tools)


def _check_options(name: object, model: object, limits: object, instruction: object, history: object) -> None:
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
    if history not in ("shared", "isolated"):
        raise ConfigurationError(f"agent {name!r}: history must be 'shared' or 'isolated', got {history!r}")


def _check_fallbacks(
    name: str, models: object, kinds: object
) -> tuple[tuple[Model, ...], tuple[int | type[BaseException], ...]]:
    if isinstance(models, Model) or not isinstance(models, Sequence) or isinstance(models, str):
        raise ConfigurationError(f"agent {name!r}: fallback_models must be a list of models, got {models!r}")
    for model in models:
        if not isinstance(model, Model):
            raise ConfigurationError(
                f"agent {name!r}: fallback_models holds {model!r}, which has no `async def complete(request)`; "
                "pass models (a ScriptedModel, an AnthropicModel, or any object with that method)"
            )
    if not isinstance(kinds, Collection) or isinstance(kinds, str):
        raise ConfigurationError(f"agent {name!r}: fallback_on must be a list of HTTP statuses or exception classes")
    for kind in kinds:
        status = type(kind) is int and 100 <= kind <= 599
        if not status and not (isinstance(kind, type) and issubclass(kind, BaseException)):
            raise ConfigurationError(
                f"agent {name!r}: fallback_on holds {kind!r}; list HTTP statuses (e.g. 404) or exception classes "
                "(e.g. loopwright.ModelError) whose failures switch to the next fallback model"
            )
    return tuple(models), tuple(kinds)


def _check_features(name: str, output_type: object, planner: object, observer: object, compaction: object) -> None:
    if output_type is not None and not (isinstance(output_type, type) and issubclass(output_type, BaseModel)):
        raise ConfigurationError(
            f"agent {name!r}: output_type must be a pydantic model class (class Answer(BaseModel): ...), "
            f"got {output_type!r}"
        )
    for option, value, example in (
        ("planner", planner, "a planner such as loopwright.features.PlanReAct() or loopwright.features.Planner()"),
        ("observer", observer, "an observer such as loopwright.features.Observer(every=3)"),
        ("compaction", compaction, "loopwright.features.Compaction(...)"),
    ):
        if value is not None and getattr(value, "extension", None) is None:
            raise ConfigurationError(f"agent {name!r}: {option} must be {example}, got {value!r}")


def _check_guards(name: str, guards: Mapping[str, Any]) -> None:
    for option, given in guards.items():
        if isinstance(given, str) or not isinstance(given, Sequence):
            raise ConfigurationError(f"agent {name!r}: {option} must be a list of guards, got {type(given).__name__}")
        for g in given:
            if not (callable(g) or isinstance(g, Agent) or hasattr(g, "check")):
                raise ConfigurationError(
                    f"agent {name!r}: {option} takes functions, Agents or loopwright.features.Guardrail values, "
                    f"got {g!r}"
                )


def _tool_map(name: str, tools: Sequence[Any]) -> dict[str, Tool]:
    found: dict[str, Tool] = {}
    for item in tools:
        t = as_tool(item)
        if t.name in found:
            raise ConfigurationError(
                f"agent {name!r} has two tools named {t.name!r}; give one another name with @tool(name=...)"
            )
        found[t.name] = t
    if TRANSFER_TOOL in found:
        raise ConfigurationError(
            f"agent {name!r}: the tool name {TRANSFER_TOOL!r} is reserved for transfers between agents; rename yours"
        )
    return found


class AgentTree:
    """The agents of one tree, with the links a value cannot hold: each agent's parent and the
    agents it may transfer to. The runner builds one per root agent."""

    def __init__(self, root: Agent) -> None:
        self.root = root
        self.agents: dict[str, Agent] = {a.name: a for a in root.walk()}
        self._parent: dict[str, Agent] = {sub.name: a for a in root.walk() for sub in a.sub_agents}
        self._targets: dict[str, tuple[Agent, ...]] = {}

    def __iter__(self) -> Iterator[Agent]:
        return iter(self.agents.values())

    def parent(self, name: str) -> Agent | None:
        return self._parent.get(name)

    def targets(self, name: str) -> tuple[Agent, ...]:
        """The agents ``name`` may transfer to: sub-agents, parent, peers (switches permitting)."""
        found = self._targets.get(name)
        if found is None:
            agent = self.agents[name]
            targets = list(agent.sub_agents)
            parent = self._parent.get(name)
            if parent is not None:
                if not agent.disallow_transfer_to_parent:
                    targets.append(parent)
                if not agent.disallow_transfer_to_peers:
                    targets += [peer for peer in parent.sub_agents if peer is not agent]
            found = self._targets[name] = tuple(targets)
        return found
