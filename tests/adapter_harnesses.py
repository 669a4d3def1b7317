"""Conformance-kit harnesses (``loopwright.testing.adapter_kit``) for this repo's adapters:
AnthropicModel over tests/fake_claude.py, OpenAIModel (Responses and Chat) over tests/fake_openai.py,
GeminiModel over tests/fake_gemini.py (:class:`QuirkyGeminiHarness`, the server quirks added to
its own harness). Each says which server quirks its API can send (``cannot_send``) and reads the
reasoning a request carries back (``returned_reasoning``)."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from loopwright import AnthropicModel
from loopwright.models.openai import OpenAIModel
from loopwright.testing.adapter_kit import Failure, Reply, dead_port
from tests import fake_claude as fc
from tests import fake_gemini as fg
from tests import fake_openai as fo

_INDEXED = "every streamed content block carries its index (content_block_start/delta)"

_CLAUDE_KINDS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                 404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 503: "api_error"}  # fmt: skip


class ClaudeHarness:
    """AnthropicModel against FakeClaude (wrapped, not changed)."""

    name = "AnthropicModel"

    def __init__(self, fake: fc.FakeClaude) -> None:
        self.fake = fake

    def make_model(self, base_url: str | None = None) -> AnthropicModel:
        url = base_url or self.fake.base_url
        return AnthropicModel(
            "claude-test", max_tokens=512, cache=None,
            client=lambda: anthropic.AsyncAnthropic(base_url=url, api_key="test-key"),
        )  # fmt: skip

    def make_unreachable_model(self) -> AnthropicModel:
        return self.make_model(f"http://127.0.0.1:{dead_port()}")

    def script(self, *items: Reply | Failure) -> None:
        for item in items:
            self.fake.script.append(self._wire(item))

    def _wire(self, item: Reply | Failure) -> Any:
        if isinstance(item, Failure):
            if item.context_window:
                return fc.Error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
            after = None if item.retry_after is None else str(item.retry_after)
            return fc.Error(item.status, _CLAUDE_KINDS.get(item.status, "api_error"), item.message, retry_after=after)
        blocks = [fc.thinking(item.reasoning, f"sig:{item.reasoning}")] if item.reasoning else []
        blocks += ([fc.text(item.text)] if item.text else []) + [fc.tool_use(c.id, c.name, c.args) for c in item.calls]
        stop = "max_tokens" if item.cut else "tool_use" if item.calls else "end_turn"
        usage = {"input_tokens": item.input_tokens, "output_tokens": item.output_tokens,
                 "cache_read_input_tokens": item.cached_tokens}  # fmt: skip
        return fc.message(*blocks, stop_reason=stop, usage=usage)

    def requests(self) -> list[dict[str, Any]]:
        return list(self.fake.requests)

    def answered_ids(self, body: dict[str, Any]) -> list[str]:
        return [
            block["tool_use_id"]
            for turn in body["messages"]
            if isinstance(turn["content"], list)
            for block in turn["content"]
            if block.get("type") == "tool_result"
        ]

    def cannot_send(self, quirk: str) -> str | None:
        return {
            "calls_without_index": _INDEXED,
            "calls_at_one_index": _INDEXED,
            "calls_without_ids": "every tool_use block has its id",
            "no_usage": "every reply carries usage (message_start, message_delta)",
        }.get(quirk)  # object_arguments: tool_use input is always an object; signed thinking comes back

    def returned_reasoning(self, body: dict[str, Any]) -> list[str]:
        return [
            block["signature"].removeprefix("sig:")
            for turn in body["messages"]
            if turn["role"] == "assistant" and isinstance(turn["content"], list)
            for block in turn["content"]
            if block.get("type") == "thinking"
        ]

    def clear(self) -> None:
        self.fake.script.clear()
        self.fake.requests.clear()
        self.fake.headers.clear()
        self.fake.paths.clear()
        if isinstance(self.fake, fo.FakeOpenAI):
            self.fake.quirks.clear()


_CHAT_QUIRKS = {"calls_without_index": "no_index", "calls_at_one_index": "index_zero", "calls_without_ids": "no_ids",
                "object_arguments": "object_arguments", "no_usage": "no_usage",
                "reasoning_required": "reasoning_required"}  # fmt: skip


class OpenAIHarness:
    """OpenAIModel (``api="responses"`` or ``"chat"``) against FakeOpenAI."""

    def __init__(
        self,
        fake: fo.FakeOpenAI,
        api: str = "responses",
        model_class: type[OpenAIModel] = OpenAIModel,
        *,
        send_reasoning: bool | None = None,
    ) -> None:
        self.fake = fake
        self.api = api
        self.model_class = model_class
        self.name = f"{model_class.__name__} ({api})"
        self.send_reasoning = api == "chat" if send_reasoning is None else send_reasoning
        """Chat: the model is made for servers that want their reasoning back (DeepSeek, Kimi)."""

    def make_model(self, base_url: str | None = None) -> OpenAIModel:
        url = base_url or self.fake.base_url
        extra = {"send_reasoning": True} if self.send_reasoning else {}
        return self.model_class(
            "gpt-5.5", api=self.api,  # type: ignore[arg-type]
            client=lambda: openai.AsyncOpenAI(base_url=url, api_key="test-key"), **extra,
        )  # fmt: skip

    def make_unreachable_model(self) -> OpenAIModel:
        return self.make_model(f"http://127.0.0.1:{dead_port()}/v1")

    def script(self, *items: Reply | Failure) -> None:
        for item in items:
            if isinstance(item, Reply) and self.api == "chat":
                self.fake.quirks |= {_CHAT_QUIRKS[q] for q in item.quirks}
            self.fake.script.append(self._wire(item))

    def cannot_send(self, quirk: str) -> str | None:
        if self.api == "chat":
            return None  # OpenAI-compatible servers send every one of them
        return {
            "calls_without_index": "every Responses stream event carries its output_index",
            "calls_at_one_index": "every Responses stream event carries its output_index",
            "calls_without_ids": "every function_call item has its call_id",
            "object_arguments": "function_call arguments are always a JSON string",
            "no_usage": "response.completed always carries usage",
        }.get(quirk)  # reasoning_required: reasoning items with their encrypted content

    def returned_reasoning(self, body: dict[str, Any]) -> list[str]:
        if "messages" in body:
            return [m["reasoning_content"] for m in body["messages"] if m.get("reasoning_content")]
        return [
            i["encrypted_content"].removeprefix("enc:")
            for i in body["input"]
            if i.get("type") == "reasoning" and i.get("encrypted_content")
        ]

    def _wire(self, item: Reply | Failure) -> Any:
        if isinstance(item, Failure):
            if item.context_window:
                return fo.Error(400, "This model's maximum context length is 128000 tokens. However, your messages "
                                "resulted in 130000 tokens.", code="context_length_exceeded")  # fmt: skip
            kind = (
                "rate_limit_error"
                if item.status == 429
                else "server_error"
                if item.status >= 500
                else "invalid_request_error"
            )
            after = None if item.retry_after is None else str(item.retry_after)
            return fo.Error(item.status, item.message, kind=kind, retry_after=after)
        output = [fo.reasoning(item.reasoning, f"enc:{item.reasoning}")] if item.reasoning else []
        output += ([fo.text(item.text)] if item.text else []) + [
            fo.function_call(c.id, c.name, c.args) for c in item.calls
        ]
        usage = {"input_tokens": item.input_tokens + item.cached_tokens, "cached_tokens": item.cached_tokens,
                 "output_tokens": item.output_tokens}  # fmt: skip
        if item.cut:
            return fo.response(*output, status="incomplete", reason="max_output_tokens", usage=usage)
        return fo.response(*output, usage=usage)

    def requests(self) -> list[dict[str, Any]]:
        return list(self.fake.requests)

    def answered_ids(self, body: dict[str, Any]) -> list[str]:
        if "messages" in body:
            return [m["tool_call_id"] for m in body["messages"] if m.get("role") == "tool"]
        return [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]

    def clear(self) -> None:
        self.fake.script.clear()
        self.fake.requests.clear()
        self.fake.headers.clear()
        self.fake.paths.clear()
        if isinstance(self.fake, fo.FakeOpenAI):
            self.fake.quirks.clear()


class QuirkyGeminiHarness(fg.GeminiHarness):
    """GeminiModel against FakeGemini (its own harness), with the server quirks its API can send:
    calls without ids (the Gemini API's own way) and thought signatures that must come back."""

    @classmethod
    def wire(cls, item: Any) -> Any:
        body = super().wire(item)
        if not isinstance(item, Reply) or "candidates" not in body:
            return body
        parts = body["candidates"][0]["content"]["parts"]
        calls = [p for p in parts if "functionCall" in p]
        if "calls_without_ids" in item.quirks:
            for part in calls:
                part["functionCall"].pop("id", None)
        if item.reasoning and calls:
            calls[0]["thoughtSignature"] = fg.sig(item.reasoning.encode())
        return body

    def cannot_send(self, quirk: str) -> str | None:
        return {
            "calls_without_index": "each streamed function call comes whole in its own part: there is no index",
            "calls_at_one_index": "each streamed function call comes whole in its own part: there is no index",
            "no_usage": "every reply carries usageMetadata",
        }.get(quirk)  # object_arguments: functionCall.args is always an object

    def returned_reasoning(self, body: dict[str, Any]) -> list[str]:
        import base64

        return [
            base64.b64decode(p["thoughtSignature"]).decode()
            for c in body["contents"]
            if c.get("role") == "model"
            for p in c.get("parts") or ()
            if "functionCall" in p and p.get("thoughtSignature")
        ]
