"""GeminiModel: Google's Gemini models through the official ``google-genai`` SDK
(``pip install 'loopwright[gemini]'``). Only this module and :mod:`.gemini_options` import
``google.genai``; the SDK's types never leave them (requests: :mod:`.gemini_mapping`; replies:
:mod:`.gemini_replies`; errors: :mod:`.gemini_errors`; options: :mod:`.gemini_options`).

Calls: ``complete`` sends ``generateContent``, ``stream`` sends ``streamGenerateContent`` (SSE) and
yields text and thought deltas, then the same reply ``complete`` would give. Function
declarations are the agent's tools (``parameters_json_schema``: the tool's JSON schema as it
is); thought parts and thought signatures go back exactly as they came (see
:mod:`.gemini_mapping`). An agent with ``output_type`` gets Gemini's native structured output
(``response_json_schema``) where the model takes it (no tools in the request, or Gemini 3 and
later), on top of the JSON instruction every model gets.

Options: any ``GenerateContentConfig`` field (``temperature``, ``thinking_config``,
``safety_settings``, ``max_output_tokens``, ``tools`` for Google's own tools such as
``google_search``, which join the agent's...), checked when the model is built: unknown names
are refused with the valid ones listed. ``parallel_tool_calls=False`` is refused (the API has no
such switch). A model id loopwright does not know warns (naming the known ones) and is used as
given.

Cut replies: a reply cut by ``MAX_TOKENS`` goes into the history and the next request asks the
model to continue in a user turn. A cut that left nothing usable (all thinking) is retried at
once, once, with twice ``max_output_tokens``; without a ``max_output_tokens`` to raise, or when
that is cut empty too, the call fails saying what to change.

Finish reasons: every ``FinishReason`` of the SDK is a cut (``MAX_TOKENS``, ``CONTINUATION``), a
policy block, a retryable error or an error that is not (:mod:`.replies` holds the tables), never
an empty answer. A prompt the API blocks, or a reply withheld on a policy (``SAFETY``,
``RECITATION``...) with nothing in it, fails the call (not retryable) naming the reason and the
categories; a withheld reply that holds text ends with ``stop_reason="refusal"``.

Tool choice: ``tool_choice`` (an option or a model setting) takes Gemini's modes, ``VALIDATED``
and ``allowed_function_names`` included (:func:`.mapping.tool_config`). Explicit caching:
:meth:`GeminiModel.create_cache` puts the instruction, tools and tool config in the cache, and
requests naming it leave them out (the API refuses them beside ``cached_content``).

Clients: as :class:`~loopwright.AnthropicModel`: without ``client`` (or with a factory) one
``genai.Client`` is made per event loop and closed with it (or by ``await model.aclose()``); a
given client is bound to the first loop that uses it. Retries: one budget — the SDK's own retries
are off for every request (``HttpRetryOptions(attempts=1)``, given clients too) and a failed call
takes the engine's bounded retry edge, which waits at least the ``Retry-After`` the API asked for.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

try:
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types
except ImportError as _missing:  # pragma: no cover - the extra is in loopwright[dev]
    raise ImportError(
        f"GeminiModel needs the google-genai SDK ({_missing.name} is missing): pip install 'loopwright[gemini]'"
    ) from None

from pydantic import ValidationError

from ...data.errors import ConfigurationError, ModelError, TokenBudgetError
from ...data.events import Instruction, ModelRequest, ModelResponse
from ..base import StreamDelta
from ..sdk import SdkModel
from .errors import api_error, transport_error, unreadable
from .mapping import gemini_major, native_schema, to_contents, tool_config
from .options import OPTIONS as OPTIONS  # (its public home was here)
from .options import checked_options
from .replies import Assembly, blocked_prompt, finish_name, read_parts, to_response, usable_parts

__all__ = ["CURRENT", "KNOWN", "GeminiModel"]

CURRENT = "gemini-3.8-flash"
"""The model the SDK's own examples use (``google-genai`` 3.6)."""
KNOWN = (
    "gemini-3.8-flash",
    "gemini-3-pro-preview",
    "gemini-3-flash-preview",
    "gemini-2.5-pro",
    "gemini-2.5-flash",
    "gemini-2.5-flash-lite",
    "gemini-2.0-flash",
)
"""Model ids loopwright knows; others warn and are used as given (new models appear weekly)."""
DEFAULT_URL = "https://generativelanguage.googleapis.com"

Client: TypeAlias = "genai.Client | genai.client.AsyncClient"
ClientFactory: TypeAlias = Callable[[], Client]

_MISSING_KEY = (
    "GEMINI_API_KEY is not set (nor GOOGLE_API_KEY): export GEMINI_API_KEY=<your key> and run again, or pass "
    "GeminiModel(..., api_key=...)"
)
_NO_SDK_RETRIES = {"retry_options": {"attempts": 1}}
_ONE_TRY = genai_types.HttpOptions(retry_options=genai_types.HttpRetryOptions(attempts=1))
_LIMIT = 65_536
"""The output limit of the known models (the cap when an empty cut reply doubles its budget)."""


class GeminiModel(SdkModel[Any]):
    """A loopwright model backed by Gemini.

    ``GeminiModel(model="gemini-3.8-flash", *, client=None, api_key=None, base_url=None,
    native_output=True, **options)``:

    - ``client``: a ``genai.Client`` (or its ``.aio``), bound to the first event loop that uses it,
      or a function that makes one (called once per event loop; loopwright closes what it made).
      Default: ``genai.Client(api_key=api_key, http_options=HttpOptions(base_url=base_url))``,
      which reads GEMINI_API_KEY or GOOGLE_API_KEY when ``api_key`` is None; a missing key is
      reported by ``complete``/``stream`` before any request is sent.
    - ``base_url``: another endpoint speaking the Gemini API (a proxy, a test server).
    - ``native_output``: send an ``output_type``'s schema as ``response_json_schema`` where the
      model takes it (default True).
    - ``options``: ``GenerateContentConfig`` fields; an agent's ``model_settings`` are merged over them.
    """

    KNOWN = KNOWN

    def __init__(
        self,
        model: str = CURRENT,
        *,
        client: Client | ClientFactory | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        native_output: bool = True,
        **options: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"GeminiModel needs a model id, e.g. GeminiModel({CURRENT!r})")
        self.model = model
        bare = model.removeprefix("models/")
        if bare not in KNOWN:
            warnings.warn(
                f"{model!r} is not a Gemini model loopwright knows ({', '.join(KNOWN)}); it is sent as given",
                UserWarning,
                stacklevel=2,
            )
        if client is not None and (api_key is not None or base_url is not None):
            raise ConfigurationError(
                "GeminiModel got client= and api_key=/base_url=: give the key and URL to the client you pass, "
                "or leave client out"
            )
        self.api_key = api_key
        self.base_url = base_url
        self.native_output = native_output
        self.options = self._checked(options, "GeminiModel(...)")
        self._caches: dict[str, dict[str, str]] = {}
        self._init_clients(client)

    # ------------------------------------------------------------------ options

    @staticmethod
    def _checked(options: dict[str, Any], where: str) -> dict[str, Any]:
        return checked_options(options, where)

    # ------------------------------------------------------------------ clients (google-genai side of PerLoopClients)
    # (the client the model uses is the SDK's async one, ``genai.Client(...).aio``)

    _client_kinds = "a google.genai Client (or its .aio)"
    _client_kind = "a google.genai Client"
    _factory_example = "GeminiModel(..., client=lambda: genai.Client(...))"

    @staticmethod
    def _is_client(value: object) -> bool:
        return isinstance(value, genai.Client | genai.client.AsyncClient)

    def _ready(self, client: Any) -> Any:
        return client.aio if isinstance(client, genai.Client) else client

    def _default_client(self) -> Any:
        http = genai_types.HttpOptions(base_url=self.base_url, retry_options=_ONE_TRY.retry_options)
        try:
            return genai.Client(api_key=self.api_key, http_options=http).aio
        except ValueError as exc:
            if "key" in str(exc).lower():
                raise ModelError(_MISSING_KEY, retryable=False) from None
            raise ModelError(f"the Gemini client could not be made: {exc}", retryable=False) from None

    @staticmethod
    def _closing(client: Any) -> Awaitable[object]:
        closed: Awaitable[object] = client.aclose()
        return closed

    # ------------------------------------------------------------------ the Model protocol

    async def _call(self, request: ModelRequest, *, deltas: bool) -> AsyncIterator[StreamDelta | ModelResponse]:
        contents, config = self.params(request)
        if request.tokens_left is not None:
            _check_budget(contents, config, request.tokens_left)
        client = await self.client()
        grown = False
        while True:
            response = None
            async for item in self._once(client, contents, config, deltas=deltas):
                if isinstance(item, ModelResponse):
                    response = item
                else:
                    yield item
            assert response is not None
            if response.stop_reason != "max_tokens" or usable_parts(response.parts):
                yield response
                return
            budget = config.get("max_output_tokens")
            if budget is None or grown or budget >= _LIMIT:
                shown = f"max_output_tokens={budget}" if budget else "the model's output limit"
                raise ModelError(
                    f"the reply was cut by {shown} before it produced anything usable (it spent the budget on "
                    "thinking); raise max_output_tokens or lower the thinking budget "
                    "(thinking_config=ThinkingConfig(thinking_budget=...))",
                    retryable=False,
                )
            config = {**config, "max_output_tokens": min(budget * 2, _LIMIT)}
            grown = True

    async def _once(
        self, client: Any, contents: list[dict[str, Any]], config: dict[str, Any], *, deltas: bool
    ) -> AsyncIterator[StreamDelta | ModelResponse]:
        try:
            if not deltas:
                reply = await client.models.generate_content(model=self.model, contents=contents, config=config)
                yield self._read(reply)
                return
            assembly = Assembly()
            async for chunk in await client.models.generate_content_stream(
                model=self.model, contents=contents, config=config
            ):
                for part in assembly.add(chunk):
                    if part.text:
                        yield StreamDelta(part.text, thought=bool(part.thought))
        except (ModelError, GeneratorExit, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise self._failure(exc) from None
        yield assembly.response(self.model, self.model)

    def _failure(self, exc: Exception) -> ModelError:
        if isinstance(exc, genai_errors.APIError):
            return api_error(exc)
        if _transport(exc):
            return transport_error(exc, self.base_url or DEFAULT_URL)
        if isinstance(exc, ValueError | ValidationError | KeyError | TypeError | genai_errors.UnknownApiResponseError):
            return unreadable(exc)
        return ModelError(f"the Gemini call broke off: {type(exc).__name__}: {exc}", retryable=True)

    def _read(self, reply: Any) -> ModelResponse:
        if not reply.candidates:
            blocked_prompt(reply)
            raise ModelError("the Gemini API answered with no candidates and no reason", retryable=True)
        candidate = reply.candidates[0]
        raw = (candidate.content.parts if candidate.content else None) or ()
        return to_response(
            read_parts(raw, self.model),
            finish_name(candidate.finish_reason),
            reply.usage_metadata,
            model=reply.model_version or self.model,
            response_id=reply.response_id,
            safety=candidate.safety_ratings,
            finish_message=candidate.finish_message,
        )

    # ------------------------------------------------------------------ request mapping

    def params(self, request: ModelRequest) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The ``contents`` and ``config`` of ``generate_content`` for ``request`` (the request
        itself is never changed)."""
        options = self.options
        if request.settings:
            options = {**options, **self._checked(dict(request.settings), "the agent's model_settings")}
        config: dict[str, Any] = {k: v for k, v in options.items() if k not in ("tools", "tool_choice")}
        config["automatic_function_calling"] = {"disable": True}
        config["http_options"] = _NO_SDK_RETRIES
        system = [i.text for i in request.instructions if i.text]
        if system:
            config["system_instruction"] = "\n\n".join(system)
        tools = list(options.get("tools") or ())
        if request.tools:
            declarations = [
                {"name": t.name, "description": t.description, "parameters_json_schema": t.input_schema}
                for t in request.tools
            ]
            tools.append({"function_declarations": declarations})
            chosen = request.tool_choice if request.tool_choice is not None else options.get("tool_choice")
            choice = tool_config(chosen, [t.name for t in request.tools])
            if choice is not None:
                config["tool_config"] = choice
        if tools:
            config["tools"] = tools
        if self.native_output and "response_json_schema" not in config and "response_schema" not in config:
            _, schema = native_schema(request.instructions)
            if schema is not None and (not request.tools or _takes_schema_with_tools(self.model)):
                config["response_mime_type"] = "application/json"
                config["response_json_schema"] = schema
        if config.get("cached_content"):
            config = self._cached(config)
        return to_contents(request.messages, self.model), config

    # ------------------------------------------------------------------ explicit caching

    def _cached(self, config: dict[str, Any]) -> dict[str, Any]:
        """A request that reads an explicit cache: the API refuses ``system_instruction``,
        ``tools`` and ``tool_config`` beside ``cached_content`` (they must be in the cache). A
        cache :meth:`create_cache` made holds this request's: they are left out. Otherwise the
        request is refused before it is sent, saying what to do."""
        name = str(config["cached_content"])
        beside = {k: config[k] for k in _CACHE_OWNED if k in config}
        if not beside:
            return config
        held = self._caches.get(name)
        if held is None:
            raise ModelError(
                f"cached_content={name!r} cannot be sent beside the agent's {', '.join(sorted(beside))}: the Gemini "
                "API takes them only inside the cache (it answers 400). Make the cache with them: "
                "name = await model.create_cache(instruction=..., tools=[...], contents=[...]) and give "
                "cached_content=name, or leave cached_content out",
                retryable=False,
            )
        changed = sorted(k for k in set(beside) | set(held) if _fingerprint(beside.get(k)) != held.get(k))
        if changed:
            raise ModelError(
                f"cached_content={name!r} holds other {', '.join(changed)} than this request has (an instruction "
                "or tool set changed since create_cache made it, e.g. a dynamic instruction or a feature's tool); the "
                "Gemini API takes them only inside the cache. Make a new cache with create_cache for these, or leave "
                "cached_content out",
                retryable=False,
            )
        return {k: v for k, v in config.items() if k not in _CACHE_OWNED}

    async def create_cache(
        self,
        *,
        instruction: str | None = None,
        tools: Any = (),
        tool_choice: Any = None,
        contents: Any = (),
        ttl: str | None = None,
        display_name: str | None = None,
    ) -> str:
        """Create an explicit cache (``client.caches.create``) holding the agent's ``instruction``,
        its ``tools`` (loopwright tools or ``ToolSpec``) and ``tool_choice``, and ``contents``
        (strings, or Gemini ``Content`` dicts); its name, for ``cached_content=``. Requests that
        give that name leave the instruction, tools and tool config out (the cache holds them);
        a request whose instruction or tools differ is refused, saying so."""
        specs = [getattr(t, "spec", t) for t in tools]
        probe = ModelRequest(
            instructions=tuple(Instruction(text=instruction) for _ in [0] if instruction),
            messages=[],
            tools=tuple(specs),
            settings={"tool_choice": tool_choice} if tool_choice is not None else {},
        )
        _, config = self.params(probe)
        held = {k: config[k] for k in _CACHE_OWNED if k in config}
        cache_config: dict[str, Any] = {**held, "contents": list(contents) or None}
        if ttl is not None:
            cache_config["ttl"] = ttl
        if display_name is not None:
            cache_config["display_name"] = display_name
        cache_config["http_options"] = _NO_SDK_RETRIES
        client = await self.client()
        try:
            made = await client.caches.create(model=self.model, config=cache_config)
        except Exception as exc:
            raise self._failure(exc) from None
        name = str(made.name)
        self._caches[name] = {k: _fingerprint(v) for k, v in held.items()}
        return name

    def __repr__(self) -> str:
        return f"GeminiModel({self.model!r})"


# ------------------------------------------------------------------ helpers

_CACHE_OWNED = ("system_instruction", "tools", "tool_config")
"""What the Gemini API takes only inside an explicit cache when a request gives ``cached_content``."""


def _fingerprint(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


_TRANSPORT = frozenset({"HTTPError", "TransportError", "ClientError", "ServerDisconnectedError"})


def _transport(exc: BaseException) -> bool:
    """A failure below HTTP from the SDK's transport (httpx, its fork httpx2, or aiohttp)."""
    return any(
        cls.__name__ in _TRANSPORT and cls.__module__.split(".")[0] in ("httpx", "httpx2", "aiohttp")
        for cls in type(exc).__mro__
    )


def _takes_schema_with_tools(model: str) -> bool:
    """Gemini 3 and later take a response schema beside function declarations."""
    return gemini_major(model) >= 3


IMAGE_TOKENS = 1_600


def _check_budget(contents: list[dict[str, Any]], config: dict[str, Any], left: int) -> None:
    """Refuse, before sending, a request larger than what is left of ``max_total_tokens``."""
    images = 0

    def strip(value: Any) -> Any:
        nonlocal images
        if isinstance(value, dict):
            if "inline_data" in value or "file_data" in value:
                images += 1
                return None
            return {k: strip(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value if not isinstance(value, bytes) else ""

    body = strip({"contents": contents, "system": config.get("system_instruction"), "tools": config.get("tools")})
    estimate = len(json.dumps(body, separators=(",", ":"), default=str)) // 4 + images * IMAGE_TOKENS
    if estimate > left:
        raise TokenBudgetError(
            f"the request holds about {estimate} input tokens (a local estimate: 4 characters a token), more than "
            f"the {max(left, 0)} left of max_total_tokens; it was not sent. Raise max_total_tokens, or keep tool "
            "results and history smaller"
        )
