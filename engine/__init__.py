"""loopwright: LLM agent loops as explicit, verifiable state machines."""

from typing import TYPE_CHECKING, Any

from .agent import Agent
from .decisions import Approve, Deny, approve, deny
from .diagram import diagram
from .errors import (
    ConfigurationError,
    CredentialRequired,
    InstructionError,
    LoopwrightError,
    MachineError,
    ModelError,
    NoTransitionError,
    ResumeError,
    ScriptExhaustedError,
    ToolError,
)
from .events import (
    ErrorInfo,
    Event,
    Instruction,
    Message,
    ModelRequest,
    ModelResponse,
    PendingRequest,
    TextPart,
    ThoughtPart,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from .extend import Rule, extend, veto
from .limits import Limits
from .log import configure_logging
from .machine import LoopMachine, Row
from .models import Model, ScriptedModel, StreamDelta, StreamingModel
from .result import RunResult
from .run_state import RunContext, RunState
from .runner import Runner, RunStream
from .stage import Stage
from .tools import Pending, Tool, tool
from .verify import Report, Violation, verify

__all__ = [
    "Agent",
    "AnthropicModel",
    "Approve",
    "ConfigurationError",
    "CredentialRequired",
    "Deny",
    "ErrorInfo",
    "Event",
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
    "Report",
    "ResumeError",
    "Row",
    "Rule",
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
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "Violation",
    "approve",
    "configure_logging",
    "deny",
    "diagram",
    "extend",
    "tool",
    "verify",
    "veto",
]

if TYPE_CHECKING:
    from .models.anthropic_model import AnthropicModel


def __getattr__(name: str) -> Any:
    """``AnthropicModel`` is imported on first use: the SDK takes over a second to import, and
    code that never talks to Claude should not pay for it."""
    if name == "AnthropicModel":
        from .models.anthropic_model import AnthropicModel

        return AnthropicModel
    raise AttributeError(f"module 'loopwright' has no attribute {name!r}")
