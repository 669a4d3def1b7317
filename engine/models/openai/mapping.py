"""loopwright's messages as OpenAI request JSON (Responses ``input`` items, Chat Completions
``messages``), and OpenAI replies (as plain JSON: ``to_dict()`` of the SDK's objects, or a
streamed reply assembled) as loopwright's. No ``openai`` import.

History rules (both APIs):

- Tool calls and their results are matched by the call id the API gave (``call_id`` /
  ``tool_calls[].id``); results go first in their turn (Chat: as ``tool`` messages right after
  the assistant's tool calls).
- A reply cut by the output limit is never continued by prefill: a short user turn
  (:data:`CONTINUE`) asks the model to go on, after a cut turn and between a cut turn and its
  continuation. A tool call cut mid-arguments is dropped (never run with half its input).
- Responses: reasoning items (with their ``encrypted_content``) are kept as
  ``ProviderPart(provider="openai", kind="reasoning")`` and sent back in place, so a reasoning
  model keeps its chain of thought across tool calls without server-side storage. Other
  output items loopwright does not interpret are kept and sent back the same way.
- Chat: a server's ``reasoning_content`` / ``reasoning`` (vLLM, Ollama, DeepSeek) becomes a
  :class:`ThoughtPart` (shown, not sent back).
- Structured output: the instruction ``structured_output`` adds for an ``output_type`` is also
  sent as the API's native JSON schema (``text.format`` / ``response_format``).

The mapping is three modules, each one job: :mod:`.openai_shared` (what both APIs share),
:mod:`.openai_responses` (the Responses API), :mod:`.openai_chat` (Chat Completions); this module
names their public parts in one place.
"""

from __future__ import annotations

from .chat import ChatAssembler, chat_messages, chat_params, from_chat
from .responses import from_responses, responses_delta, responses_input, responses_params, responses_tools
from .shared import CONTINUE, PROVIDER, SCHEMA_MARKER, output_schema, parse_args, usable

__all__ = [
    "CONTINUE",
    "PROVIDER",
    "SCHEMA_MARKER",
    "ChatAssembler",
    "chat_messages",
    "chat_params",
    "from_chat",
    "from_responses",
    "output_schema",
    "parse_args",
    "responses_delta",
    "responses_input",
    "responses_params",
    "responses_tools",
    "usable",
]
