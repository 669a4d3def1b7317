"""Errors raised by loopwright. Every message says what was wrong and what to do.

::

    LoopwrightError
    ├── ConfigurationError (ValueError)   an agent, tool, limit or table is set up wrongly
    │   └── MachineError                   the transition table is malformed
    ├── NoTransitionError (RuntimeError)   no row's guards held: a bug in a table
    ├── InstructionError (KeyError)        a {placeholder} names a state key that is not there
    ├── ModelError (RuntimeError)          a model call failed (status, retryable)
    │   ├── ScriptExhaustedError           a ScriptedModel has no replies left
    │   └── TokenBudgetError               a request was not sent: it would overspend max_total_tokens
    ├── ToolError (RuntimeError)           a tool call failed (becomes an error tool result)
    ├── ResumeError (ValueError)           a resume() that cannot apply: nothing was changed
    │   └── RunBusy                        another worker holds the run (stores)
    └── CredentialRequired                 raised by a tool: the run waits for a credential
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .values import clean_text

if TYPE_CHECKING:
    from .parts import Usage

REDACTED = "[redacted]"
_KEY_LIKE = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,})")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each known secret (8 characters or more) and anything shaped like an API
    key or a bearer token replaced by ``[redacted]``: for error messages, which may echo them
    (and echo bad input: lone surrogates become U+FFFD, as in any value a run saves)."""
    for secret in secrets:
        if len(secret) >= 8 and secret in text:
            text = text.replace(secret, REDACTED)
    return clean_text(_KEY_LIKE.sub(REDACTED, text) if "sk-" in text or "Bearer" in text else text)


class LoopwrightError(Exception):
    """Root of every error loopwright raises."""


class ConfigurationError(LoopwrightError, ValueError):
    """Something is set up wrongly; the message names it and the fix."""


class MachineError(ConfigurationError):
    """The transition table is malformed (unknown state, missing fallback, no handler)."""


class NoTransitionError(LoopwrightError, RuntimeError):
    """No row out of a stage had guards that held. Tables end every stage in a fallback row,
    so this is a bug in a (user-extended) table, never a normal way for a run to end."""


class InstructionError(LoopwrightError, KeyError):
    """An instruction's ``{key}`` placeholder names a key missing from the session state."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ModelError(LoopwrightError, RuntimeError):
    """A model call failed. ``retryable`` errors take the reason stage's bounded retry edge."""

    def __init__(
        self, message: str, *, status: int | None = None, retryable: bool = True, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        """Seconds the provider asked to wait before a retry; the retry edge waits at least that."""
        self.usage: Usage | None = None
        """Tokens the failed call spent anyway (an adapter's attempts billed before it failed: a
        reply cut by ``max_tokens`` whose continuation failed): the run charges them."""


class ScriptExhaustedError(ModelError):
    """A ScriptedModel was asked for more replies than its script holds."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class TokenBudgetError(ModelError):
    """A model did not send a request: it holds more tokens than are left of the run's
    ``max_total_tokens`` (``ModelRequest.tokens_left``). The table ends the run as when the
    token budget is spent: in salvage when salvage is on, else with outcome ``"limit"``."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class ContextWindowError(TokenBudgetError):
    """The provider refused a request, or cut a reply, because the model's context window is full
    ("prompt is too long", ``model_context_window_exceeded``, OpenAI's ``context_length_exceeded``).
    Adapters raise it so the run takes the token-budget edge (compaction when the agent has it,
    else salvage, else outcome ``"limit"``) instead of failing with its partial answer lost."""

    def __init__(self, message: str, *, status: int | None = None, partial: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.partial = partial
        """The text of a reply cut because the window was full: what salvage keeps when its own
        call cannot fit either."""


class ToolError(LoopwrightError, RuntimeError):
    """Raise from a tool to send the model a clean error message (no traceback type name)."""


class ResumeError(LoopwrightError, ValueError):
    """``Runner.resume`` was given a run that is not waiting, or decisions that do not fit its
    pending requests. The run state was not changed."""


class RunBusy(ResumeError):
    """Another worker holds this run in the store (it resumed it first, or it is still running):
    this worker must not run it. Retry later, or resume another run."""


class CredentialRequired(LoopwrightError):
    """Raise from a tool that needs a credential the run does not have yet (ADK's auth
    request). The run suspends with a credential request; when it is resumed with the
    credential, the tool is called again and finds it in ``ctx.credentials[key]``."""

    def __init__(self, key: str, message: str = "") -> None:
        super().__init__(message or f"credential {key!r} required")
        self.key = key
        self.message = message or f"credential {key!r} required"
