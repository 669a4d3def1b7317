"""OpenAIModel: OpenAI's models, and any OpenAI-compatible server (Ollama, vLLM, LM Studio,
OpenRouter, a LiteLLM proxy), through the official ``openai`` SDK (``pip install
'loopwright[openai]'``). Only this module, :mod:`.openai_options` and :mod:`.openai_errors` import
``openai``; the SDK's types never leave them (mapping: :mod:`.openai_mapping`; model ids and
options: :mod:`.openai_options`).

APIs: ``api="responses"`` (the default: the Responses API, for OpenAI's own models; reasoning
items are kept and sent back with their encrypted content, requests are stateless with
``store=False``) or ``api="chat"`` (Chat Completions: the wire format OpenAI-compatible servers
speak; give ``base_url=``).

Cut replies: a reply cut by the output limit (``status="incomplete"`` / ``finish_reason="length"``)
goes into the history with its partial text and the loop goes round; the next request asks the
model to continue in a user turn. A cut that left nothing usable (inside the reasoning or a tool
call's arguments) is retried at once, once, with twice ``max_tokens``; without ``max_tokens`` (the
server's own limit) or if that is cut empty too, the call fails saying what to raise.

Clients: as :class:`~loopwright.models.anthropic.AnthropicModel`: without ``client`` (or with a
factory, ``client=lambda: openai.AsyncOpenAI(...)``) one client is made per event loop and closed
when that loop shuts down, or by ``await model.aclose()``; a client instance is used as given and
bound to the first event loop that uses it.

Retries: one budget. The SDK's own retries are off (``max_retries=0``, for given clients too) and
a failed call takes the engine's bounded retry edge, which waits at least the ``Retry-After`` the
server sent. Errors: see :mod:`.openai_errors`.
"""

from __future__ import annotations

try:
    import openai
except ImportError:  # pragma: no cover - the extra is in dev
    raise ImportError("OpenAIModel needs the openai SDK: pip install 'loopwright[openai]'") from None

import asyncio
import os
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal, TypeAlias

from ...data.errors import ConfigurationError, ModelError
from ...data.events import ModelRequest, ModelResponse, ProviderPart
from ..base import StreamDelta
from ..sdk import SdkModel
from .chat import ChatAssembler, chat_params, from_chat
from .client_tools import handlers
from .errors import MISSING_KEY, model_error, stream_failed
from .options import CURRENT, KNOWN_MODELS, checked_options, is_reasoning
from .options import SAMPLING as SAMPLING  # (its public home was here)
from .responses import from_responses, responses_delta, responses_params
from .shared import PROVIDER, check_budget, drop_nulls, estimated, usable

__all__ = ["CURRENT", "KNOWN_MODELS", "Client", "ClientFactory", "OpenAIModel"]

Client: TypeAlias = openai.AsyncOpenAI
ClientFactory: TypeAlias = Callable[[], openai.AsyncOpenAI]
Api = Literal["responses", "chat"]


class OpenAIModel(SdkModel[Client]):
    """A loopwright model backed by the OpenAI API or an OpenAI-compatible server.

    ``OpenAIModel(model="gpt-5.5", max_tokens=None, *, api="responses", base_url=None,
    client=None, parallel_tool_calls=None, max_retries=0, send_reasoning=False,
    **request_options)``:

    - ``max_tokens``: the output budget of one reply (``max_output_tokens`` /
      ``max_completion_tokens``; default: the server's own limit).
    - ``api``: ``"responses"`` (default) or ``"chat"`` (Chat Completions, for compatible servers).
    - ``base_url``: the server, e.g. ``"http://127.0.0.1:11434/v1"`` for Ollama (any key works
      there: without OPENAI_API_KEY a placeholder is sent).
    - ``client``: an ``openai.AsyncOpenAI`` (or ``AsyncAzureOpenAI``), or a function that makes
      one (called once per event loop; loopwright closes what it made). Default:
      ``AsyncOpenAI()``, which reads OPENAI_API_KEY and OPENAI_BASE_URL.
    - ``parallel_tool_calls``: ``False`` asks for at most one tool call a reply.
    - ``max_retries``: the SDK's own retries (default 0: ``Limits.max_model_retries`` is the one
      retry budget, visible in the trace).
    - ``send_reasoning`` (``api="chat"``): send the server's reasoning back on the assistant turns
      that asked for tools, under the field it came in (``reasoning_content`` or ``reasoning``):
      DeepSeek's and Kimi's thinking modes refuse a tool loop without it.
    - ``request_options``: other ``responses.create`` / ``chat.completions.create`` arguments
      (``reasoning``, ``temperature``, ``service_tier``, ``tools`` for OpenAI's hosted tools...);
      unknown names, and sampling options on reasoning models, are refused here with the valid
      ones named. An agent's ``model_settings`` are merged over them.
    """

    def __init__(
        self,
        model: str,
        max_tokens: int | None = None,
        *,
        api: Api = "responses",
        base_url: str | None = None,
        client: Client | ClientFactory | None = None,
        parallel_tool_calls: bool | None = None,
        max_retries: int = 0,
        send_reasoning: bool = False,
        **request_options: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"OpenAIModel needs a model id, e.g. OpenAIModel({CURRENT!r})")
        if api not in ("responses", "chat"):
            raise ConfigurationError(f"api must be 'responses' or 'chat' (for OpenAI-compatible servers), got {api!r}")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise ConfigurationError(f"max_tokens must be a positive int or None, got {max_tokens!r}")
        if parallel_tool_calls not in (None, True, False):
            raise ConfigurationError(f"parallel_tool_calls must be True, False or None, got {parallel_tool_calls!r}")
        if send_reasoning not in (True, False):
            raise ConfigurationError(f"send_reasoning must be True or False, got {send_reasoning!r}")
        if send_reasoning and api != "chat":
            raise ConfigurationError(
                "send_reasoning=True is for api='chat' (DeepSeek, Kimi and other OpenAI-compatible servers); the "
                "Responses API's reasoning items are always sent back"
            )
        self.model = model
        self.api: Api = api
        self.send_reasoning = send_reasoning
        self.max_tokens = max_tokens
        self.base_url = base_url
        self.parallel_tool_calls = parallel_tool_calls
        self.max_retries = max_retries
        self.reasoning = is_reasoning(model)
        self._reasons = self.reasoning  # asks for reasoning.encrypted_content; learnt from replies too
        self._init_clients(client)
        custom = base_url is not None or (
            client is not None and "api.openai.com" not in str(getattr(client, "base_url", ""))
        )
        self._limit_key = (
            "max_output_tokens" if api == "responses" else "max_tokens" if custom else "max_completion_tokens"
        )
        if not custom and model not in KNOWN_MODELS:
            warnings.warn(
                f"{model!r} is not a model id openai {openai.__version__} knows (it is sent as given; check the "
                f"spelling). Known ids include {', '.join(KNOWN_MODELS[:12])}, ... "
                "(openai.types.shared.ChatModel lists them all)",
                UserWarning,
                stacklevel=2,
            )
        self.request_options = self._checked(request_options, "OpenAIModel(...)")

    # ------------------------------------------------------------------ options

    def _checked(self, options: dict[str, Any], where: str) -> dict[str, Any]:
        return checked_options(options, where, api=self.api, model=self.model, reasoning=self.reasoning)

    # ------------------------------------------------------------------ clients (the openai side of PerLoopClients)

    _client_kinds = "an openai.AsyncOpenAI (or AsyncAzureOpenAI)"
    _client_kind = "an openai.AsyncOpenAI"
    _factory_example = "OpenAIModel(..., client=lambda: openai.AsyncOpenAI(...))"
    _client_errors = (openai.OpenAIError,)

    @staticmethod
    def _is_client(value: object) -> bool:
        return isinstance(value, openai.AsyncOpenAI)

    def _ready(self, client: Client) -> Client:
        return client.with_options(max_retries=self.max_retries)

    def _default_client(self) -> Client:
        key = os.environ.get("OPENAI_API_KEY")
        if not key and self.base_url is None and not os.environ.get("OPENAI_BASE_URL"):
            raise ModelError(MISSING_KEY, retryable=False)
        return openai.AsyncOpenAI(api_key=key or "unused", base_url=self.base_url, max_retries=self.max_retries)

    def _client_error(self, exc: Exception) -> ModelError:
        return model_error(exc, self.base_url or "the OpenAI API")

    # ------------------------------------------------------------------ the Model protocol

    async def _call(self, request: ModelRequest, *, deltas: bool) -> AsyncIterator[StreamDelta | ModelResponse]:
        params = self.params(request)
        if request.tokens_left is not None:  # refused before it is sent if it cannot fit
            check_budget(params, request.tokens_left)
        client = await self.client()
        where = str(client.base_url).rstrip("/")
        grown = False
        while True:
            response = None
            if self.api == "responses":
                handled = handlers(request.tools) if request.tools else {}
                calls = self._responses(client, params, deltas=deltas, where=where, handled=handled)
            else:
                calls = self._chat(client, params, deltas=deltas, where=where)
            async for item in calls:
                if isinstance(item, ModelResponse):
                    response = item
                else:
                    yield item
            assert response is not None
            if request.tools:
                response = drop_nulls(response, request.tools)
            if response.stop_reason != "max_tokens" or usable(response):
                yield response
                return
            limit = params.get(self._limit_key)
            if limit is None or grown:
                shown = f"max_tokens={limit}" if limit is not None else "the server's output limit"
                raise ModelError(
                    f"the reply was cut by {shown} before it produced anything usable (it stopped inside its "
                    "reasoning or a tool call's arguments); raise OpenAIModel(..., max_tokens=...) or lower the "
                    "reasoning effort",
                    retryable=False,
                )
            params = {**params, self._limit_key: limit * 2}
            grown = True

    async def _responses(
        self, client: Client, params: dict[str, Any], *, deltas: bool, where: str, handled: dict[str, str]
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        try:
            model, body = _split(params)
            if not deltas:
                reply = await client.responses.create(model=model, extra_body=body)
                yield self._from_responses(reply.to_dict(), handled)
                return
            final: dict[str, Any] | None = None
            stream = await client.responses.create(model=model, stream=True, extra_body=body)
            try:
                event: Any  # read by its type tag (mypy does not narrow the 60-kind union through it)
                async for event in stream:
                    kind = event.type
                    if kind in ("response.completed", "response.incomplete"):
                        final = event.response.to_dict()
                    elif kind == "response.failed":
                        raise stream_failed(kind, event.response.error, where)
                    elif kind == "error":
                        raise stream_failed(kind, event, where)
                    elif (delta := responses_delta(event)) is not None and delta[0]:
                        yield StreamDelta(delta[0], thought=delta[1])
            finally:
                await stream.close()
        except (ModelError, GeneratorExit, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise model_error(exc, where) from exc
        if final is None:
            raise ModelError(
                "the reply stream ended before the response was complete (no response.completed); the partial "
                "reply was discarded",
                retryable=True,
            )
        yield self._from_responses(final, handled)

    def _from_responses(self, reply: dict[str, Any], handled: dict[str, str]) -> ModelResponse:
        response = from_responses(reply, handled)
        if not self._reasons and any(
            type(p) is ProviderPart and p.kind == "reasoning" and not p.block.get("encrypted_content")
            for p in response.parts
        ):
            self._reasons = True  # the API says it reasons (whatever its name): ask for its content from now on
        return response

    async def _chat(
        self, client: Client, params: dict[str, Any], *, deltas: bool, where: str
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        try:
            model, body = _split(params)
            if not deltas:
                reply = (await client.chat.completions.create(model=model, messages=(), extra_body=body)).to_dict()
                yield self._from_chat(reply, params)
                return
            assembler = ChatAssembler()
            body["stream_options"] = {"include_usage": True}
            stream = await client.chat.completions.create(model=model, messages=(), stream=True, extra_body=body)
            try:
                async for chunk in stream:
                    shown = assembler.add(chunk)
                    if shown is not None:
                        yield StreamDelta(shown[0], thought=shown[1])
            finally:
                await stream.close()
            final = assembler.reply()
        except (ModelError, GeneratorExit, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise model_error(exc, where) from exc
        yield self._from_chat(final, params)

    def _from_chat(self, reply: dict[str, Any], params: dict[str, Any]) -> ModelResponse:
        response = from_chat(reply, keep_reasoning=self.send_reasoning)
        return response if reply.get("usage") else estimated(response, params)

    # ------------------------------------------------------------------ request mapping

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The ``responses.create`` / ``chat.completions.create`` arguments for ``request``."""
        options = self.request_options
        if request.settings:
            options = {**options, **self._checked(dict(request.settings), "the agent's model_settings")}
        responses = self.api == "responses"
        params: dict[str, Any] = {"model": self.model}
        if responses:
            params["store"] = False
            if self._reasons or "reasoning" in options or _reasoned(request):
                params["include"] = ["reasoning.encrypted_content"]
        if self.max_tokens is not None:
            params[self._limit_key] = self.max_tokens
        params.update(
            responses_params(request) if responses else chat_params(request, send_reasoning=self.send_reasoning)
        )
        for key, value in options.items():
            if key == "tools":  # hosted tools given as options, then the agent's own
                params["tools"] = [*value, *params.get("tools", ())]
            elif key == "text" and "text" in params:
                params["text"] = {**value, **params["text"]}
            else:
                params[key] = value
        if self.parallel_tool_calls is not None and params.get("tools"):
            params["parallel_tool_calls"] = self.parallel_tool_calls
        return params

    def __repr__(self) -> str:
        shown = f", api={self.api!r}" if self.api != "responses" else ""
        at = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"OpenAIModel({self.model!r}{shown}{at})"


def _reasoned(request: ModelRequest) -> bool:
    """The history holds an OpenAI reasoning item: the model reasons, whatever its name."""
    return any(
        type(p) is ProviderPart and p.provider == PROVIDER and p.kind == "reasoning"
        for m in request.messages
        if m.role == "assistant"
        for p in m.parts
    )


def _split(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The model, and the rest of the body as ``extra_body``: it is wire JSON already, and the
    SDK's own walk of typed arguments (``maybe_transform``, through every TypedDict of the input
    union) cost more than the rest of a call against a local server (bench/bench_adapters.py)."""
    body = dict(params)
    return body.pop("model"), body
