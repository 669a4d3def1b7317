"""loopwright: LLM agent loops as explicit, verifiable state machines.

This package is the public skin: the names below are what a user of the README and the guides
imports. Extension writers import from :mod:`loopwright.extend`; providers live in
:mod:`loopwright.models` (``.anthropic``, ``.openai``, ``.gemini``); stores, workflows, features,
eval, testing, serve and integrations each have their own public package (the list is
``PUBLIC`` in :mod:`loopwright.data.exports`). Every other module is private and may move.

Names are imported on first use (PEP 562), so ``import loopwright`` costs almost nothing and a
program pays only for the parts it uses (the anthropic SDK, drawing, logging).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .data.exports import lazy_exports as _lazy_exports

_EXPORTS: dict[str, str] = {
    "ToolsetError": ".runtime.toolsets",
    "write_trace_page": ".cli.trace_page",
    "recording": ".cli.trace_page",
    "Agent": ".runtime.agent",
    "agent_tool": ".loop.subrun",
    "AnthropicModel": "loopwright.models.anthropic",
    "Approve": ".data.decisions",
    "approve": ".data.decisions",
    "claude_tool": ".runtime.claude_tools",
    "ConfigurationError": ".data.errors",
    "configure_logging": ".runtime.observers",
    "ContextWindowError": ".data.errors",
    "CredentialRequired": ".data.errors",
    "Deny": ".data.decisions",
    "deny": ".data.decisions",
    "diagram": ".machines.diagram",
    "DocumentPart": ".data.events",
    "ErrorInfo": ".data.events",
    "Event": ".data.events",
    "ImagePart": ".data.events",
    "Instruction": ".data.events",
    "InstructionError": ".data.errors",
    "instrument": ".runtime.observers",
    "Limits": ".data.limits",
    "LoopwrightError": ".data.errors",
    "MachineError": ".data.errors",
    "Message": ".data.events",
    "Model": "loopwright.models",
    "ModelError": ".data.errors",
    "ModelRequest": ".data.events",
    "ModelResponse": ".data.events",
    "NoTransitionError": ".data.errors",
    "Pending": ".runtime.tools",
    "PendingRequest": ".data.events",
    "ProviderPart": ".data.events",
    "Report": ".machines.verify",
    "ResumeError": ".data.errors",
    "RetryTool": ".runtime.tools",
    "Run": ".loop.runner",
    "RunBusy": ".data.errors",
    "RunContext": ".runtime.context",
    "Runner": ".loop.runner",
    "RunResult": ".data.result",
    "RunState": ".data.run_state",
    "RunStream": ".loop.runner",
    "ScriptedModel": "loopwright.models",
    "ScriptExhaustedError": ".data.errors",
    "Stage": ".data.stage",
    "StreamDelta": "loopwright.models",
    "StreamingModel": "loopwright.models",
    "TextPart": ".data.events",
    "ThoughtPart": ".data.events",
    "TokenBudgetError": ".data.errors",
    "Tool": ".runtime.tools",
    "tool": ".runtime.tools",
    "ToolCall": ".data.events",
    "ToolContext": ".runtime.tools",
    "ToolError": ".data.errors",
    "ToolResult": ".data.events",
    "ToolSpec": ".data.events",
    "uninstrument": ".runtime.observers",
    "Usage": ".data.events",
    "verify": ".machines.verify",
    "Violation": ".machines.verify",
}
"""Each public name and the module defining it (relative to ``loopwright``, or a public package
that claims it first)."""

__all__ = [
    "Agent",
    "AnthropicModel",
    "Approve",
    "ConfigurationError",
    "ContextWindowError",
    "CredentialRequired",
    "Deny",
    "DocumentPart",
    "ErrorInfo",
    "Event",
    "ImagePart",
    "Instruction",
    "InstructionError",
    "Limits",
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
    "RetryTool",
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
    "ToolsetError",
    "Usage",
    "Violation",
    "agent_tool",
    "approve",
    "claude_tool",
    "configure_logging",
    "deny",
    "diagram",
    "instrument",
    "recording",
    "tool",
    "uninstrument",
    "verify",
    "write_trace_page",
]

if TYPE_CHECKING:
    __version__: str
    from .cli.trace_page import recording as recording
    from .cli.trace_page import write_trace_page as write_trace_page
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
    from .loop.runner import Run as Run
    from .loop.runner import Runner as Runner
    from .loop.runner import RunStream as RunStream
    from .loop.subrun import agent_tool as agent_tool
    from .machines.diagram import diagram as diagram
    from .machines.verify import Report as Report
    from .machines.verify import Violation as Violation
    from .machines.verify import verify as verify
    from .models.anthropic.model import AnthropicModel as AnthropicModel
    from .models.base import Model as Model
    from .models.base import StreamDelta as StreamDelta
    from .models.base import StreamingModel as StreamingModel
    from .models.scripted import ScriptedModel as ScriptedModel
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
    from .runtime.toolsets import ToolsetError as ToolsetError

_getattr, __dir__ = _lazy_exports(__name__, _EXPORTS)


def __getattr__(name: str) -> Any:
    if name == "__version__":  # the installed distribution's, read on first use (importlib.metadata costs ~20 ms)
        return importlib.import_module("importlib.metadata").version("loopwright")
    return _getattr(name)
