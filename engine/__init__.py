"""loopwright: LLM agent loops as explicit, verifiable state machines.

The names below are imported on first use (PEP 562), so ``import loopwright`` costs almost
nothing and a program pays only for the parts it uses (the anthropic SDK, drawing, logging).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Agent": "runtime.agent",
    "AnthropicModel": "models.anthropic_model",
    "Approve": "data.decisions",
    "Budget": "table.budgets",
    "ConfigurationError": "data.errors",
    "CredentialRequired": "data.errors",
    "Deny": "data.decisions",
    "DocumentPart": "data.events",
    "ErrorInfo": "data.events",
    "Event": "data.events",
    "Extension": "table.machine",
    "ImagePart": "data.events",
    "Instruction": "data.events",
    "InstructionError": "data.errors",
    "Limits": "data.limits",
    "LoopMachine": "table.machine",
    "LoopwrightError": "data.errors",
    "MachineError": "data.errors",
    "Message": "data.events",
    "Model": "models",
    "ModelError": "data.errors",
    "ModelRequest": "data.events",
    "ModelResponse": "data.events",
    "NoTransitionError": "data.errors",
    "Pending": "runtime.tools",
    "RetryTool": "runtime.tools",
    "PendingRequest": "data.events",
    "ProviderPart": "data.events",
    "Report": "machines.verify",
    "ResumeError": "data.errors",
    "Row": "table.machine",
    "Rule": "table.machine",
    "RunBusy": "data.errors",
    "RunContext": "runtime.context",
    "RunResult": "data.result",
    "Run": "loop.runner",
    "RunState": "data.run_state",
    "RunStream": "loop.runner",
    "Runner": "loop.runner",
    "ScriptExhaustedError": "data.errors",
    "ScriptedModel": "models",
    "Stage": "data.stage",
    "StreamDelta": "models",
    "StreamingModel": "models",
    "TextPart": "data.events",
    "ThoughtPart": "data.events",
    "TokenBudgetError": "data.errors",
    "OpenAIModel": "models.openai_model",
    "GeminiModel": "models.gemini_model",
    "ContextWindowError": "data.errors",
    "Tool": "runtime.tools",
    "ToolContext": "runtime.tools",
    "ToolCall": "data.events",
    "ToolError": "data.errors",
    "ToolResult": "data.events",
    "ToolSpec": "data.events",
    "Usage": "data.events",
    "Violation": "machines.verify",
    "agent_tool": "loop.subrun",
    "approve": "data.decisions",
    "compose": "table.machine",
    "configure_logging": "runtime.observers",
    "deny": "data.decisions",
    "diagram": "machines.diagram",
    "extend": "machines.extend",
    "instrument": "runtime.observers",
    "tool": "runtime.tools",
    "uninstrument": "runtime.observers",
    "verify": "machines.verify",
    "veto": "machines.extend",
    "Block": "features.guardrails",
    "Guardrail": "features.guardrails",
    "McpToolset": "integrations.mcp",
    "Rewrite": "features.guardrails",
    "claude_tool": "runtime.claude_tools",
    "register_price": "models.prices",
}
"""Each public name and the module (under ``loopwright``) that defines it."""

__all__ = [
    "Agent",
    "AnthropicModel",
    "Approve",
    "Block",
    "Budget",
    "ConfigurationError",
    "ContextWindowError",
    "CredentialRequired",
    "Deny",
    "DocumentPart",
    "ErrorInfo",
    "Event",
    "Extension",
    "GeminiModel",
    "Guardrail",
    "ImagePart",
    "Instruction",
    "InstructionError",
    "Limits",
    "LoopMachine",
    "LoopwrightError",
    "MachineError",
    "McpToolset",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "NoTransitionError",
    "OpenAIModel",
    "Pending",
    "PendingRequest",
    "ProviderPart",
    "Report",
    "ResumeError",
    "RetryTool",
    "Rewrite",
    "Row",
    "Rule",
    "Run",
    "RunBusy",
    "RunContext",
    "RunResult",
    "RunState",
    "RunStream",
    "Runner",
    "ScriptExhaustedError",
    "ScriptedModel",
    "Stage",
    "StreamDelta",
    "StreamingModel",
    "TextPart",
    "ThoughtPart",
    "TokenBudgetError",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "Violation",
    "agent_tool",
    "approve",
    "claude_tool",
    "compose",
    "configure_logging",
    "deny",
    "diagram",
    "extend",
    "instrument",
    "register_price",
    "tool",
    "uninstrument",
    "verify",
    "veto",
]

if TYPE_CHECKING:
    __version__: str
    from .data.decisions import Approve as Approve
    from .data.decisions import Deny as Deny
    from .data.decisions import approve as approve
    from .data.decisions import deny as deny
    from .data.errors import ConfigurationError as ConfigurationError
    from .data.errors import ContextWindowError as ContextWindowError
    from .data.errors import CredentialRequired as CredentialRequired
    from .data.errors import InstructionError as InstructionError
    from .data.errors import LoopwrightError as LoopwrightError
    from .data.errors import MachineError as MachineError
    from .data.errors import ModelError as ModelError
    from .data.errors import NoTransitionError as NoTransitionError
    from .data.errors import ResumeError as ResumeError
    from .data.errors import RunBusy as RunBusy
    from .data.errors import ScriptExhaustedError as ScriptExhaustedError
    from .data.errors import TokenBudgetError as TokenBudgetError
    from .data.errors import ToolError as ToolError
    from .data.events import DocumentPart as DocumentPart
    from .data.events import ErrorInfo as ErrorInfo
    from .data.events import Event as Event
    from .data.events import ImagePart as ImagePart
    from .data.events import Instruction as Instruction
    from .data.events import Message as Message
    from .data.events import ModelRequest as ModelRequest
    from .data.events import ModelResponse as ModelResponse
    from .data.events import PendingRequest as PendingRequest
    from .data.events import ProviderPart as ProviderPart
    from .data.events import TextPart as TextPart
    from .data.events import ThoughtPart as ThoughtPart
    from .data.events import ToolCall as ToolCall
    from .data.events import ToolResult as ToolResult
    from .data.events import ToolSpec as ToolSpec
    from .data.events import Usage as Usage
    from .data.limits import Limits as Limits
    from .data.result import RunResult as RunResult
    from .data.run_state import RunState as RunState
    from .data.stage import Stage as Stage
    from .features.guardrails import Block as Block
    from .features.guardrails import Guardrail as Guardrail
    from .features.guardrails import Rewrite as Rewrite
    from .integrations.mcp import McpToolset as McpToolset
    from .loop.runner import Run as Run
    from .loop.runner import Runner as Runner
    from .loop.runner import RunStream as RunStream
    from .loop.subrun import agent_tool as agent_tool
    from .machines.diagram import diagram as diagram
    from .machines.extend import extend as extend
    from .machines.extend import veto as veto
    from .machines.verify import Report as Report
    from .machines.verify import Violation as Violation
    from .machines.verify import verify as verify
    from .models import Model as Model
    from .models import ScriptedModel as ScriptedModel
    from .models import StreamDelta as StreamDelta
    from .models import StreamingModel as StreamingModel
    from .models.anthropic_model import AnthropicModel as AnthropicModel
    from .models.gemini_model import GeminiModel as GeminiModel
    from .models.openai_model import OpenAIModel as OpenAIModel
    from .models.prices import register_price as register_price
    from .runtime.agent import Agent as Agent
    from .runtime.claude_tools import claude_tool as claude_tool
    from .runtime.context import RunContext as RunContext
    from .runtime.observers import configure_logging as configure_logging
    from .runtime.observers import instrument as instrument
    from .runtime.observers import uninstrument as uninstrument
    from .runtime.tools import Pending as Pending
    from .runtime.tools import RetryTool as RetryTool
    from .runtime.tools import Tool as Tool
    from .runtime.tools import ToolContext as ToolContext
    from .runtime.tools import tool as tool
    from .table.budgets import Budget as Budget
    from .table.machine import Extension as Extension
    from .table.machine import LoopMachine as LoopMachine
    from .table.machine import Row as Row
    from .table.machine import Rule as Rule
    from .table.machine import compose as compose


class _Package(types.ModuleType):
    """``loopwright`` itself. ``diagram``, ``verify`` and ``extend`` name both a function and
    a module (the old path of :mod:`loopwright.machines.diagram`, ...): importing the module must
    not hide the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _EXPORTS:
            return  # the module stays in sys.modules; the public name is the function
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name == "__version__":  # the installed distribution's, read on first use (importlib.metadata costs ~20 ms)
        return importlib.import_module("importlib.metadata").version("loopwright")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loopwright' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
