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
- Responses: a reasoning item that came without its ``encrypted_content`` is not sent back (a
  stateless request cannot resolve its ``rs_`` id); an assistant message's ``phase``, a call's
  ``namespace`` and a custom tool's call are kept as marks (``ProviderPart`` kinds ``phase``,
  ``namespace``, ``custom_call``) and restored on replay; hosted tools' items keep their ``status``.
- Chat: a server's ``reasoning_content`` / ``reasoning`` (vLLM, Ollama, DeepSeek) becomes a
  :class:`ThoughtPart` (shown); with ``send_reasoning`` it is also kept as
  ``ProviderPart(provider="openai_chat")`` and sent back on the turns that asked for tools.
  Other providers' thoughts are never sent to either API.
- Chat replies are taken as OpenAI-compatible servers send them (:class:`.chat.ChatAssembler`):
  calls without ``index`` or ``id``, arguments as objects; arguments that are not JSON become
  a call the tool's validation answers with an error (:data:`.shared.NOT_JSON`).
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
