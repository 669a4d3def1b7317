"""Cross-provider history: histories made by any mix of providers (Claude, OpenAI Responses,
OpenAI Chat, two Gemini models), in any order a run with fallbacks could make them, replayed on
every adapter's request mapping: no request the real API would refuse. Each API's refusal rules
are written down here as checks (tool_use/tool_result pairing and Claude-only thinking for
Claude; call/output pairing and OpenAI-only reasoning items for Responses; tool messages for
Chat; turn order, foreign signatures and Gemini 3's thought signatures for Gemini)."""

from __future__ import annotations

import base64
import json
import warnings
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import Message, ModelRequest, TextPart, ToolCall, ToolResult
from loopwright.data.events import ProviderPart, ThoughtPart, ToolSpec
from loopwright.models.anthropic import AnthropicModel
from loopwright.models.gemini import GeminiModel
from loopwright.models.gemini.mapping import LOCAL_ID, PLACEHOLDER
from loopwright.models.openai import OpenAIModel

GEMINI_3 = "gemini-3-pro-preview"
GEMINI_OTHER = "gemini-3-flash-preview"
GEMINI_2 = "gemini-2.5-flash"
MAKERS = ("claude", "responses", "chat", GEMINI_3, GEMINI_OTHER, GEMINI_2)
"""Who can make an assistant turn (the three Gemini models are three makers: their signatures
are their own)."""
TOOL = ToolSpec(name="lookup", description="Look up.", input_schema={"type": "object", "properties": {}})


# ---------------------------------------------------------------- what each provider leaves in the history


@dataclass
class Counter:
    n: int = 0

    def next(self) -> int:
        self.n += 1
        return self.n


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def _gemini_signature(maker: str, n: int) -> ProviderPart:
    return ProviderPart(
        provider="gemini", kind="thought_signature", block={"signature": _b64(f"{maker}-sig-{n}"), "model": maker}
    )


@st.composite
def steps(draw: Any, counter: Counter) -> tuple[Message, list[ToolCall], bool]:
    """One assistant turn as its maker's adapter records it: (message, its calls, cut)."""
    maker = draw(st.sampled_from(MAKERS))
    thinks = draw(st.booleans())
    said = draw(st.sampled_from(["", "Let me see.", "Done."]))
    calls = draw(st.integers(0, 3))
    said = said if said or calls else "Done."  # a reply has something in it (an empty one is retried)
    cut = calls == 0 and said != "" and draw(st.integers(0, 4)) == 0
    n = counter.next()
    parts: list[Any] = []
    ids: list[ToolCall] = []
    if maker == "claude":
        if thinks:
            redacted = draw(st.booleans())
            parts.append(
                ThoughtPart(redacted=True, data=f"claude-redacted-{n}")
                if redacted
                else ThoughtPart(text="Claude thinks.", signature=f"claude-sig-{n}")
            )
        parts += [TextPart(text=said)] if said else []
        ids = [ToolCall(id=f"toolu_{n}_{k}", name="lookup", args={"k": k}) for k in range(calls)]
        parts += ids
    elif maker == "responses":
        if thinks or calls:
            block = {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": f"openai-enc-{n}"}
            parts.append(ProviderPart(provider="openai", kind="reasoning", block=block))
        parts += [TextPart(text=said)] if said else []
        ids = [ToolCall(id=f"call_{n}_{k}", name="lookup", args={"k": k}) for k in range(calls)]
        parts += ids
    elif maker == "chat":
        parts += [ThoughtPart(text="Chat reasoning.")] if thinks else []  # reasoning_content, shown
        parts += [TextPart(text=said)] if said else []
        ids = [ToolCall(id=f"chatcall_{n}_{k}", name="lookup", args={"k": k}) for k in range(calls)]
        parts += ids
    else:  # a Gemini model: thoughts, then text and calls, the first call (or the text) signed
        if thinks:
            parts.append(ThoughtPart(text="Gemini thinks."))
        signs_text = said != "" and draw(st.booleans())
        if said:
            parts += [_gemini_signature(maker, n)] if signs_text else []
            parts.append(TextPart(text=said))
        local = draw(st.booleans())
        for k in range(calls):
            call_id = f"{LOCAL_ID}{n}_{k}" if local else f"fc_{n}_{k}"
            call = ToolCall(id=call_id, name="lookup", args={"k": k})
            signed = k == 0 and maker != GEMINI_2  # Gemini 3 signs the first call of each step
            parts += [_gemini_signature(maker, n)] if signed else []
            parts.append(call)
            ids.append(call)
    return Message(role="assistant", parts=tuple(parts)), ids, cut


@st.composite
def histories(draw: Any) -> list[Message]:
    """A run's history up to a request: the user's turn, then steps; each step's calls are
    answered (in order) before the next step; a step without calls ends a turn (the user speaks
    again) unless it was cut (the next step continues it)."""
    counter = Counter()
    history = [Message(role="user", parts=(TextPart(text="Go."),))]
    for _ in range(draw(st.integers(1, 6))):
        message, calls, cut = draw(steps(counter))
        history.append(message)
        if calls:
            history.append(
                Message(
                    role="user",
                    parts=tuple(ToolResult(call_id=c.id, name=c.name, content=f"r{c.args['k']}") for c in calls),
                )
            )
        elif not cut:
            history.append(Message(role="user", parts=(TextPart(text="And then?"),)))
    return history


# ---------------------------------------------------------------- each API's refusal rules


CLAUDE_BLOCKS = frozenset({"text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"})


THINKING = ("thinking", "redacted_thinking")


def claude_refusals(params: dict[str, Any]) -> list[str]:
    messages = params["messages"]
    out: list[str] = []
    if not messages or messages[0]["role"] != "user" or messages[-1]["role"] != "user":
        out.append("the conversation must start and end with a user message")
    assistant = [m for m in messages if m["role"] == "assistant"]
    last = assistant[-1]["content"] if assistant else []
    if "thinking" in params and any(b["type"] == "tool_use" for b in last) and last[0]["type"] not in THINKING:
        out.append("When `thinking` is enabled, a final `assistant` message must start with a thinking block")
    for n, message in enumerate(messages):
        if n and messages[n - 1]["role"] == message["role"]:
            out.append(f"messages.{n}: roles must alternate")
        out += [f"messages.{n}: {why}" for block in message["content"] if (why := _claude_block(block))]
        out += [f"messages.{n}: {why}" for why in _claude_pairing(messages, n)]
    return out


def _claude_block(block: dict[str, Any]) -> str | None:
    kind = block["type"]
    if kind not in CLAUDE_BLOCKS:
        return f"unknown block type {kind!r}"
    if kind == "text" and not block["text"].strip():
        return "text content blocks must be non-empty"
    if kind == "thinking" and not str(block.get("signature", "")).startswith("claude-sig-"):
        return "Invalid `signature` in `thinking` block"
    if kind == "redacted_thinking" and not str(block.get("data", "")).startswith("claude-redacted-"):
        return "Invalid `data` in `redacted_thinking` block"
    return None


def _claude_pairing(messages: list[dict[str, Any]], n: int) -> list[str]:
    out: list[str] = []
    blocks = messages[n]["content"]
    uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    after = messages[n + 1]["content"] if n + 1 < len(messages) else []
    if uses and sorted(b["tool_use_id"] for b in after if b["type"] == "tool_result") != sorted(uses):
        out.append("`tool_use` ids were found without `tool_result` blocks immediately after")
    results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    before = messages[n - 1]["content"] if n else []
    if not set(results) <= {b["id"] for b in before if b["type"] == "tool_use"}:
        out.append("unexpected `tool_use_id` found in `tool_result` blocks")
    if [b["type"] for b in blocks][: len(results)] != ["tool_result"] * len(results):
        out.append("tool_result blocks must come first")
    return out


def responses_refusals(params: dict[str, Any]) -> list[str]:
    out: list[str] = []
    items = params["input"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    for n, item in enumerate(items):
        kind = item.get("type", "message")
        if kind not in ("message", "function_call", "function_call_output", "reasoning"):
            out.append(f"input[{n}]: unknown item type {kind!r}")
        if kind == "reasoning":
            if not str(item.get("encrypted_content", "")).startswith("openai-enc-"):
                out.append(f"input[{n}]: Item with id {item.get('id')!r} not found (a foreign reasoning item)")
            if n + 1 >= len(items) or items[n + 1].get("type") == "function_call_output":
                out.append(f"input[{n}]: reasoning was provided without its required following item")
        if (
            kind == "function_call_output"
            and item["call_id"] not in calls[: calls.index(item["call_id"]) + 1 if item["call_id"] in calls else 0]
        ):
            out.append(f"input[{n}]: No tool call found for function call output with call_id {item['call_id']}")
        if kind == "message" and item.get("role") == "assistant" and any(k in item for k in ("thinking", "signature")):
            out.append(f"input[{n}]: unknown parameter")
    out += [f"No tool output found for function call {c}." for c in calls if c not in outputs]
    return out


CHAT_FIELDS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content", "reasoning"})


def chat_refusals(params: dict[str, Any]) -> list[str]:
    out: list[str] = []
    messages = params["messages"]
    for n, message in enumerate(messages):
        extra = set(message) - {
            "role",
            "content",
            "tool_calls",
            "tool_call_id",
            "name",
            "reasoning_content",
            "reasoning",
        }
        if extra:
            out.append(f"messages[{n}]: unknown field(s) {sorted(extra)}")
        calls = [c["id"] for c in message.get("tool_calls") or ()]
        if calls:
            answered = []
            for later in messages[n + 1 :]:
                if later["role"] != "tool":
                    break
                answered.append(later["tool_call_id"])
            if sorted(answered) != sorted(calls):
                out.append(
                    f"messages[{n}]: An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'"
                )
        if message["role"] == "tool":
            before = next((m for m in reversed(messages[:n]) if m["role"] != "tool"), {})
            if message["tool_call_id"] not in [c["id"] for c in before.get("tool_calls") or ()]:
                out.append(f"messages[{n}]: messages with role 'tool' must be a response to a preceeding 'tool_calls'")
    return out


def gemini_refusals(model: str, contents: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    strict = model.startswith("gemini-3")
    plain = [
        n
        for n, c in enumerate(contents)
        if c["role"] == "user" and any("function_response" not in p for p in c["parts"])
    ]
    current = plain[-1] if plain else 0
    for n, content in enumerate(contents):
        if content["role"] not in ("user", "model"):
            out.append(f"contents[{n}].role: must be user or model")
        parts = content["parts"]
        responses = [p["function_response"]["name"] for p in parts if "function_response" in p]
        if responses and (n == 0 or contents[n - 1]["role"] != "model"):
            out.append("function response turn must come immediately after a function call turn")
        calls = [p for p in parts if "function_call" in p]
        if calls and content["role"] == "model":
            after = contents[n + 1]["parts"] if n + 1 < len(contents) else []
            if len([p for p in after if "function_response" in p]) != len(calls):
                out.append("the number of function response parts must equal the number of function call parts")
            if strict and n > current and not calls[0].get("thought_signature"):
                out.append("Function call is missing a thought_signature in functionCall parts.")
        for part in parts:
            signature = part.get("thought_signature")
            own = signature == PLACEHOLDER or (signature or b"").startswith(model.encode() + b"-sig-")
            if signature is not None and not own:
                out.append(f"contents[{n}]: Corrupted thought signature ({signature!r} sent to {model})")
            if "function_response" in part and part["function_response"].get("parts") and not strict:
                out.append("multimodal function responses need Gemini 3")
    return out


# ---------------------------------------------------------------- the property


def _quiet(make: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make()


ADAPTERS: dict[str, Any] = {
    "claude": lambda: AnthropicModel("claude-sonnet-5-5"),
    "claude-thinking": lambda: AnthropicModel(
        "claude-sonnet-4-5", max_tokens=8192, thinking={"type": "enabled", "budget_tokens": 2048}
    ),
    "responses": lambda: OpenAIModel("gpt-5", api="responses"),
    "chat": lambda: OpenAIModel("gpt-5", api="chat"),
    GEMINI_3: lambda: GeminiModel(GEMINI_3, api_key="k"),
    GEMINI_OTHER: lambda: GeminiModel(GEMINI_OTHER, api_key="k"),
    GEMINI_2: lambda: GeminiModel(GEMINI_2, api_key="k"),
}


def refusals(adapter: str, history: list[Message]) -> list[str]:
    model = _quiet(ADAPTERS[adapter])
    request = ModelRequest(messages=history, tools=(TOOL,))
    if isinstance(model, GeminiModel):
        contents, _ = model.params(request)
        return gemini_refusals(model.model, contents)
    params = model.params(request)
    if adapter.startswith("claude"):
        return claude_refusals(params)
    return responses_refusals(params) if adapter == "responses" else chat_refusals(params)


@pytest.mark.parametrize("adapter", list(ADAPTERS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(history=histories())
def test_no_adapter_sends_what_its_api_refuses(adapter: str, history: list[Message]) -> None:
    found = refusals(adapter, history)
    assert not found, f"{adapter} would be refused: {found}\n{json.dumps([m.model_dump(mode='json') for m in history])}"


def test_the_checks_catch_what_the_apis_refuse() -> None:
    """Each API's checks above flag a request its API refuses (so the property can fail)."""
    use = {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}
    foreign = {"type": "thinking", "thinking": "x", "signature": "gemini-sig"}
    claude = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Go."}]},
                           {"role": "assistant", "content": [foreign, use]},
                           {"role": "user", "content": [{"type": "text", "text": "?"}]}]}  # fmt: skip
    assert len(claude_refusals(claude)) == 2  # a foreign signature, a tool_use left unanswered
    reasoning = {"type": "reasoning", "id": "rs_1", "encrypted_content": "elsewhere"}
    responses = {"input": [reasoning, {"type": "function_call_output", "call_id": "c9", "output": "r"}]}
    assert len(responses_refusals(responses)) == 3
    chat = {"messages": [{"role": "tool", "tool_call_id": "c1", "content": "r"}]}
    assert chat_refusals(chat)
    unsigned = [{"role": "user", "parts": [{"text": "Go."}]}, {"role": "model", "parts": [{"function_call": {}}]},
                {"role": "user", "parts": [{"function_response": {"name": "lookup"}}]}]  # fmt: skip
    assert gemini_refusals(GEMINI_3, unsigned) == [
        "Function call is missing a thought_signature in functionCall parts."
    ]
    unsigned[1]["parts"][0]["thought_signature"] = b"gemini-3-flash-preview-sig-1"
    assert "Corrupted thought signature" in gemini_refusals(GEMINI_3, unsigned)[0]
