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
    "Agent": "agent",
    "AnthropicModel": "models.anthropic_model",
    "Approve": "decisions",
    "Budget": "budgets",
    "ConfigurationError": "errors",
    "CredentialRequired": "errors",
    "Deny": "decisions",
    "DocumentPart": "events",
    "ErrorInfo": "events",
    "Event": "events",
    "Extension": "machine",
    "ImagePart": "events",
    "Instruction": "events",
    "InstructionError": "errors",
    "Limits": "limits",
    "LoopMachine": "machine",
    "LoopwrightError": "errors",
    "MachineError": "errors",
    "Message": "events",
    "Model": "models",
    "ModelError": "errors",
    "ModelRequest": "events",
    "ModelResponse": "events",
    "NoTransitionError": "errors",
    "Pending": "tools",
    "PendingRequest": "events",
    "ProviderPart": "events",
    "Report": "verify",
    "ResumeError": "errors",
    "Row": "machine",
    "Rule": "machine",
    "RunBusy": "errors",
    "RunContext": "context",
    "RunResult": "result",
    "Run": "runner",
    "RunState": "run_state",
    "RunStream": "runner",
    "Runner": "runner",
    "ScriptExhaustedError": "errors",
    "ScriptedModel": "models",
    "Stage": "stage",
    "StreamDelta": "models",
    "StreamingModel": "models",
    "TextPart": "events",
    "ThoughtPart": "events",
    "TokenBudgetError": "errors",
    "Tool": "tools",
    "ToolCall": "events",
    "ToolError": "errors",
    "ToolResult": "events",
    "ToolSpec": "events",
    "Usage": "events",
    "Violation": "verify",
    "agent_tool": "subrun",
    "approve": "decisions",
    "compose": "machine",
    "configure_logging": "observers",
    "deny": "decisions",
    "diagram": "diagram",
    "extend": "extend",
    "instrument": "observers",
    "tool": "tools",
    "uninstrument": "observers",
    "verify": "verify",
    "veto": "extend",
}
"""Each public name and the module (under ``loopwright``) that defines it."""

__all__ = [
    "Agent",
    "AnthropicModel",
    "Approve",
    "Budget",
    "ConfigurationError",
    "CredentialRequired",
    "Deny",
    "DocumentPart",
    "ErrorInfo",
    "Event",
    "Extension",
    "ImagePart",
    "Instruction",
    "InstructionError",
    "Limits",
    "LoopMachine",
    "LoopwrightError",
    "MachineError",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "NoTransitionError",
    "Pending",
    "PendingRequest",
    "ProviderPart",
    "Report",
    "ResumeError",
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
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "Violation",
    "agent_tool",
    "approve",
    "compose",
    "configure_logging",
    "deny",
    "diagram",
    "extend",
    "instrument",
    "tool",
    "uninstrument",
    "verify",
    "veto",
]

if TYPE_CHECKING:
    __version__: str
    from .agent import Agent as Agent
    from .budgets import Budget as Budget
    from .context import RunContext as RunContext
    from .decisions import Approve as Approve
    from .decisions import Deny as Deny
    from .decisions import approve as approve
    from .decisions import deny as deny
    from .diagram import diagram as diagram
    from .errors import ConfigurationError as ConfigurationError
    from .errors import CredentialRequired as CredentialRequired
    from .errors import InstructionError as InstructionError
    from .errors import LoopwrightError as LoopwrightError
    from .errors import MachineError as MachineError
    from .errors import ModelError as ModelError
    from .errors import NoTransitionError as NoTransitionError
    from .errors import ResumeError as ResumeError
    from .errors import RunBusy as RunBusy
    from .errors import ScriptExhaustedError as ScriptExhaustedError
    from .errors import TokenBudgetError as TokenBudgetError
    from .errors import ToolError as ToolError
    from .events import DocumentPart as DocumentPart
    from .events import ErrorInfo as ErrorInfo
    from .events import Event as Event
    from .events import ImagePart as ImagePart
    from .events import Instruction as Instruction
    from .events import Message as Message
    from .events import ModelRequest as ModelRequest
    from .events import ModelResponse as ModelResponse
    from .events import PendingRequest as PendingRequest
    from .events import ProviderPart as ProviderPart
    from .events import TextPart as TextPart
    from .events import ThoughtPart as ThoughtPart
    from .events import ToolCall as ToolCall
    from .events import ToolResult as ToolResult
    from .events import ToolSpec as ToolSpec
    from .events import Usage as Usage
    from .extend import extend as extend
    from .extend import veto as veto
    from .limits import Limits as Limits
    from .machine import Extension as Extension
    from .machine import LoopMachine as LoopMachine
    from .machine import Row as Row
    from .machine import Rule as Rule
    from .machine import compose as compose
    from .models import Model as Model
    from .models import ScriptedModel as ScriptedModel
    from .models import StreamDelta as StreamDelta
    from .models import StreamingModel as StreamingModel
    from .models.anthropic_model import AnthropicModel as AnthropicModel
    from .observers import configure_logging as configure_logging
    from .observers import instrument as instrument
    from .observers import uninstrument as uninstrument
    from .result import RunResult as RunResult
    from .run_state import RunState as RunState
    from .runner import Run as Run
    from .runner import Runner as Runner
    from .runner import RunStream as RunStream
    from .stage import Stage as Stage
    from .subrun import agent_tool as agent_tool
    from .tools import Pending as Pending
    from .tools import Tool as Tool
    from .tools import tool as tool
    from .verify import Report as Report
    from .verify import Violation as Violation
    from .verify import verify as verify


class _Package(types.ModuleType):
    """``loopwright`` itself. ``diagram``, ``verify`` and ``extend`` name both a function and
    the module defining it: importing the module must not hide the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in _EXPORTS and _EXPORTS[name] == name:
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
