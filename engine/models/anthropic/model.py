"""AnthropicModel: Claude through the official ``anthropic`` SDK. Only this module and its
helpers (:mod:`.anthropic_errors`, :mod:`.anthropic_clients`, :mod:`.anthropic_options`) import
``anthropic``; the SDK's types never leave them (mapping: :mod:`.anthropic_mapping`; per-model
facts: :mod:`.claude_facts`).

Calls: every call streams (``complete`` too), so any ``max_tokens`` the model allows works; the
default ``max_tokens`` is the model's own output limit. Options are checked when the model is
built: unknown names are refused with the valid ones listed, ``betas`` travel as the
``anthropic-beta`` header, sampling parameters a model refuses are dropped with a warning, and a
model the SDK lists as deprecated warns (``FutureWarning``, shown by default).

Cut replies: a reply cut by ``max_tokens`` goes into the history; the next request asks the model
to continue in a user turn (never a prefill). A cut that left nothing usable (inside thinking or
a tool call's input) is retried at once, once, with twice the budget (up to the model's limit);
if that is cut empty too the call fails with a message saying what to raise — the same request
is never sent twice. (A streamed retry streams its deltas again.) The cut attempts are billed: their
usage joins the reply's, or, when the call then fails, rides on the error (``ModelError.usage``)
and the run charges it (:mod:`.anthropic_cuts`).

Clients: without ``client`` (or with a factory, ``client=lambda: AsyncAnthropicVertex(...)``)
one client is made per event loop and closed when that loop shuts down (``asyncio.run`` and
``run_sync`` do), or by ``await model.aclose()``. A client instance is used as given and bound to
the first event loop that uses it; using it from another loop (a second ``run_sync``) is a clear,
non-retryable error. Bedrock (and Bedrock Mantle, where the SDK has it) and Vertex clients are accepted.

Tools: the agent's tool specs become the API's definitions in :mod:`.anthropic_tools` (strict
schemas, ``ToolSpec.provider["anthropic"]`` fields, tools Anthropic defines); a tool marked
``eager_input_streaming`` streams its calls' input as :class:`StreamToolInput` pieces.
``preflight="count_tokens"`` asks the API to count a request with a token budget before it is sent.

Beta features: an option only the beta endpoint takes (``context_management``, server-side
``compaction``, ``mcp_servers``...) sends the request to ``client.beta.messages`` (its ``betas``
as the argument); its compaction blocks are kept whole and sent back, and what context editing
cleared is on the reply (``details["context_management"]``, in the ``model_responded`` event).
A request that names a file uploaded with the Files API (``DocumentPart(file_id=...)``...)
carries the ``files-api-2025-04-14`` beta by itself.

Retries: one budget. The SDK's own retries are off (``max_retries=0``, for given clients too) and
a failed call takes the engine's bounded retry edge, which waits at least the ``Retry-After`` the
API sent. Errors: see :mod:`.anthropic_errors`.
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anthropic

from ...data.errors import ConfigurationError, ModelError, TokenBudgetError
from ...data.events import ModelRequest, ModelResponse, Usage
from ..base import StreamDelta, StreamToolInput
from ..sdk import SdkModel
from .clients import MISSING_KEY, is_client
from .clients import Client as Client
from .clients import ClientFactory as ClientFactory
from .cuts import billed, next_budget, plus
from .errors import stream_error
from .facts import CURRENT, SAMPLING, facts_for
from .mapping import (
    add_dynamic,
    estimate_tokens,
    foreign_tool_turn,
    last_container,
    mark_history,
    to_messages,
    to_response,
    to_system,
)
from .options import (
    FILES_BETA,
    SDK_DEPRECATED,
    check_thinking,
    keep_sealed,
    reseal,
    uses_files,
    warn_if_deprecated,
    with_beta,
)
from .tools import Definitions

__all__ = ["AnthropicModel", "Client", "ClientFactory", "to_messages", "to_response", "to_system"]

CacheTTL = Literal["5m", "1h"]
_SDK_PARAMS = frozenset(inspect.signature(anthropic.resources.messages.AsyncMessages.create).parameters) - {"self"}
"""The arguments this SDK release's ``messages.create`` names."""
_BETA_ONLY = (
    frozenset(inspect.signature(anthropic.resources.beta.messages.AsyncMessages.create).parameters)
    - _SDK_PARAMS
    - {"self", "betas"}
)
"""Arguments only the beta endpoint takes (``context_management``, ``compaction``, ``mcp_servers``...):
a request with one goes to ``client.beta.messages``."""
_OWNED = frozenset({"model", "messages", "system", "stream", "tool_choice"})
"""Arguments loopwright sets itself from the agent and the request."""
_OPTIONS = (_SDK_PARAMS | _BETA_ONLY | SAMPLING | {"betas", "tools", "max_tokens"}) - _OWNED
"""Names ``request_options`` and an agent's ``model_settings`` may use."""
_COUNT_PARAMS = frozenset(inspect.signature(anthropic.resources.messages.AsyncMessages.count_tokens).parameters)
_BETA_COUNT_PARAMS = frozenset(
    inspect.signature(anthropic.resources.beta.messages.AsyncMessages.count_tokens).parameters
)
"""What ``count_tokens`` takes of a request (``preflight="count_tokens"``)."""
Preflight = Literal["estimate", "count_tokens"]
_SDK_DEPRECATED = SDK_DEPRECATED
"""The SDK's deprecated models (the one dict :func:`.anthropic_options.warn_if_deprecated` reads)."""


class AnthropicModel(SdkModel[Client]):
    """A loopwright model backed by Claude.

    ``AnthropicModel(model="claude-sonnet-5-5", max_tokens=None, client=None, max_retries=0,
    cache="5m", betas=(), parallel_tool_calls=True, preflight="estimate", **request_options)``:

    - ``max_tokens``: the output budget of one reply (default: the model's own limit).
    - ``client``: an ``AsyncAnthropic`` / ``AsyncAnthropicBedrock`` / ``AsyncAnthropicVertex``
      (bound to the first event loop that uses it), or a function that makes one (called once
      per event loop; loopwright closes what it made). Default: ``AsyncAnthropic()``, which reads
      ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL or the SDK's other credential sources; missing
      credentials are reported by ``complete``/``stream`` before any request is sent.
    - ``max_retries``: the SDK's own retries (default 0: the engine's ``Limits.max_model_retries``
      is the one retry budget, and it is visible in the trace).
    - ``cache``: prompt-cache TTL, ``"5m"`` or ``"1h"`` (for runs that wait on people), or None
      for no caching. The tools and static instructions, and the history up to its last block,
      are cached; dynamic instructions travel after the cached prefix.
    - ``betas``: beta feature names, sent as the ``anthropic-beta`` header.
    - ``parallel_tool_calls``: False asks for at most one tool call a reply
      (``tool_choice.disable_parallel_tool_use``; ``tool_choice`` itself is loopwright's).
    - ``preflight``: how a request is checked against what is left of ``max_total_tokens``
      before it is sent: ``"estimate"`` (local, about 4 characters a token, generous) or
      ``"count_tokens"`` (the API's free token-counting endpoint: exact, one more round trip
      per call; only for runs with a token budget).
    - ``request_options``: other ``messages.create`` arguments (``thinking``, ``stop_sequences``,
      ``metadata``, ``tools`` for server tools such as web search, which join the agent's own...);
      an agent's ``model_settings`` are merged over them.
    """

    def __init__(
        self,
        model: str,
        max_tokens: int | None = None,
        *,
        client: Client | ClientFactory | None = None,
        max_retries: int = 0,
        cache: CacheTTL | None = "5m",
        betas: Sequence[str] = (),
        parallel_tool_calls: bool = True,
        preflight: Preflight = "estimate",
        **request_options: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"AnthropicModel needs a model id, e.g. AnthropicModel(model={CURRENT!r})")
        self.model = model
        self.facts = facts_for(model)
        warn_if_deprecated(model, self.facts.deprecated)
        if max_tokens is None:
            max_tokens = self.facts.max_output
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be a positive int, got {max_tokens!r}")
        if self.facts.known and max_tokens > self.facts.max_output:
            raise ConfigurationError(
                f"{model} writes at most {self.facts.max_output} output tokens; max_tokens={max_tokens} is more. "
                "Leave max_tokens out to use the model's limit"
            )
        if cache not in ("5m", "1h", None):
            raise ConfigurationError(f"cache must be '5m', '1h' or None, got {cache!r}")
        if isinstance(betas, str):
            betas = [betas]
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.cache: CacheTTL | None = cache
        self.betas = tuple(betas)
        _check_flags(parallel_tool_calls, preflight)
        self.parallel_tool_calls = parallel_tool_calls
        self.preflight: Preflight = preflight
        self.request_options = self._checked(request_options, "AnthropicModel(...)")
        self._init_clients(client)
        self._formats: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        self._definitions = Definitions(getattr(anthropic, "transform_schema", None))

    # ------------------------------------------------ clients (the anthropic side of PerLoopClients)

    _client_kinds = (
        "an anthropic async client (AsyncAnthropic, AsyncAnthropicBedrock, AsyncAnthropicVertex, "
        "AsyncAnthropicBedrockMantle)"
    )
    _client_kind = "an anthropic async client"
    _factory_example = "AnthropicModel(..., client=lambda: anthropic.AsyncAnthropic(...))"
    _client_errors = (anthropic.AnthropicError,)

    @staticmethod
    def _is_client(value: object) -> bool:
        return is_client(value)

    def _ready(self, client: Client) -> Client:
        return client.with_options(max_retries=self.max_retries)

    def _default_client(self) -> Client:
        client = anthropic.AsyncAnthropic(max_retries=self.max_retries)
        if all(getattr(client, name, None) is None for name in ("api_key", "auth_token", "credentials")):
            raise ModelError(MISSING_KEY, retryable=False)
        return client

    def _client_error(self, exc: Exception) -> ModelError:  # a profile named or configured but unusable
        return ModelError(f"the Anthropic credentials could not be loaded: {exc}", retryable=False)

    # ------------------------------------------------------------------ options

    def _checked(self, options: dict[str, Any], where: str) -> dict[str, Any]:
        """``options`` with unknown names refused and sampling parameters the model refuses dropped."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            owned = [name for name in unknown if name in _OWNED]
            verb = "is" if len(owned) == 1 else "are"
            hint = f" ({', '.join(owned)} {verb} set by loopwright itself)" if owned else ""
            raise ConfigurationError(
                f"{where} got unknown option(s) {', '.join(map(repr, unknown))}{hint}; "
                f"valid options: {', '.join(sorted(_OPTIONS))}"
            )
        check_thinking(self.model, self.facts, options.get("thinking"), where)
        refused = sorted(name for name in options if name in SAMPLING and name not in self.facts.sampling)
        if refused:
            warnings.warn(
                f"{self.model} does not accept {', '.join(refused)} (the API would answer 400); "
                f"{'it is' if len(refused) == 1 else 'they are'} dropped from the request",
                UserWarning,
                stacklevel=3,
            )
            options = {k: v for k, v in options.items() if k not in refused}
        return dict(options)

    # ------------------------------------------------------------------ the Model protocol

    async def _call(
        self, request: ModelRequest, *, deltas: bool
    ) -> AsyncIterator[StreamDelta | StreamToolInput | ModelResponse]:
        params = self.params(request)
        client = await self.client()
        beta = not _BETA_ONLY.isdisjoint(params)
        if beta:
            params = _beta_params(params)
        if request.tokens_left is not None:  # refused before it is sent if it cannot fit
            await self._preflight(client, params, request.tokens_left, beta)
        budget = params["max_tokens"]
        # the usage of attempts cut before they produced anything usable: billed, so the step
        # reports it too (max_total_tokens and cost see it)
        spent: Usage | None = None
        while True:
            response = None
            try:
                async for item in self._once(client, params, deltas=deltas, beta=beta):
                    if isinstance(item, ModelResponse):
                        response = item
                    else:
                        yield item
            except ModelError as exc:
                billed(exc, spent, self.model)
                raise
            assert response is not None
            bigger = next_budget(response, spent, params["max_tokens"], budget, self.facts, self.model)
            if bigger is None:
                if spent is not None:
                    response = response.model_copy(update={"usage": spent + response.usage})
                yield response
                return
            spent = plus(spent, response.usage)
            params = {**params, "max_tokens": bigger}

    async def _preflight(self, client: Client, params: dict[str, Any], left: int, beta: bool) -> None:
        if self.preflight == "count_tokens":
            await _count_tokens(client, params, left, beta=beta)
        else:
            _check_budget(params, left)

    async def _once(
        self, client: Client, params: dict[str, Any], *, deltas: bool, beta: bool = False
    ) -> AsyncIterator[StreamDelta | StreamToolInput | ModelResponse]:
        messages: Any = client.beta.messages if beta else client.messages
        sealed: dict[int, str] = {}  # compaction blocks' encrypted content, by block index
        # tools streamed eagerly (eager_input_streaming): their calls' input deltas are events
        eager = _eager(params) if deltas else None
        calls: dict[int, tuple[str, str]] = {}
        try:
            async with messages.stream(**params) as stream:
                async for event in stream:
                    if beta:
                        keep_sealed(event, sealed)
                    if not deltas:
                        continue
                    if event.type == "text" and event.text:
                        yield StreamDelta(event.text)
                    elif event.type == "thinking" and event.thinking:
                        yield StreamDelta(event.thinking, thought=True)
                    elif eager and (piece := _tool_input(event, eager, calls)) is not None:
                        yield piece
                message = await stream.get_final_message()
            reseal(message, sealed)
        except (ModelError, GeneratorExit, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise stream_error(exc) from exc
        if getattr(message, "stop_reason", None) is None:
            raise ModelError(
                "the reply stream ended before the message was complete (no message_stop); the partial "
                "reply was discarded",
                retryable=True,
            )
        yield to_response(message)

    # ------------------------------------------------------------------ request mapping

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The ``messages.create`` arguments for ``request``."""
        options = self.request_options
        if request.settings:
            options = {**options, **self._checked(dict(request.settings), "the agent's model_settings")}
        params = self._option_params(options)
        messages = to_messages(request.messages)
        static = [i for i in request.instructions if i.cache]
        dynamic = [i.text for i in request.instructions if not i.cache and i.text]
        if self.cache is not None:
            mark_history(messages, self.cache)
            moved = add_dynamic(messages, dynamic)
            system = to_system(static if moved else request.instructions, self.cache)
        else:
            system = to_system(request.instructions)
        params["messages"] = messages
        if uses_files(messages):  # a file uploaded with the Files API: its beta goes with the request
            with_beta(params, FILES_BETA)
        if system:
            params["system"] = system
        define = self._definitions
        tools = list(options.get("tools", ())) + [define(t) for t in request.tools]
        if tools:  # server tools given as options, then the agent's own
            params["tools"] = tools
            if request.tool_choice is not None or not self.parallel_tool_calls:
                choice: dict[str, Any] = {"type": request.tool_choice or "auto"}
                if not self.parallel_tool_calls and choice["type"] != "none":
                    choice["disable_parallel_tool_use"] = True  # at most one tool call a reply
                params["tool_choice"] = choice
        if request.output_schema is not None and self.facts.structured_outputs:
            self._output_format(params, request.output_schema)
        _from_history(params, request, messages)
        return params

    def _output_format(self, params: dict[str, Any], schema: dict[str, Any]) -> None:
        """Constrain the reply to ``schema`` (the agent's ``output_type``): ``output_config.format``,
        the schema made the way the API takes it by the SDK's own ``transform_schema``."""
        key = id(schema)
        found = self._formats.get(key)
        if found is None or found[0] is not schema:
            transform = getattr(anthropic, "transform_schema", None)  # (SDK releases before 0.7x lack it)
            shaped = transform(schema) if transform is not None else schema
            found = self._formats[key] = (schema, {"type": "json_schema", "schema": shaped})
        into = params if "output_config" in _SDK_PARAMS else params.setdefault("extra_body", {})
        into["output_config"] = {**into.get("output_config", {}), "format": found[1]}

    def _option_params(self, options: dict[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        extra: dict[str, Any] = {}
        for key, value in options.items():
            if key not in ("betas", "tools"):
                # options this SDK release does not name (temperature in 2.x) still reach the API
                (params if key in _SDK_PARAMS or key in _BETA_ONLY else extra)[key] = value
        if extra:
            params["extra_body"] = {**params.get("extra_body", {}), **extra}
        betas = options.get("betas", self.betas)
        if betas:
            names = [betas] if isinstance(betas, str) else list(betas)
            params["extra_headers"] = {**params.get("extra_headers", {}), "anthropic-beta": ",".join(names)}
        return params

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"


# ------------------------------------------------------------------ helpers


def _from_history(params: dict[str, Any], request: ModelRequest, messages: list[dict[str, Any]]) -> None:
    """What the history decides: the code-execution container to reuse, and thinking left out of
    a request whose last tool turn another provider made (the API refuses thinking on without
    Claude's thinking at the start of that turn)."""
    if "container" not in params and (container := last_container(request.messages)):
        params["container"] = container
    if not foreign_tool_turn(messages):
        return
    params.pop("thinking", None)
    extra = params.get("extra_body")
    if isinstance(extra, dict) and "thinking" in extra:
        params["extra_body"] = {k: v for k, v in extra.items() if k != "thinking"}


def _check_flags(parallel_tool_calls: object, preflight: object) -> None:
    if not isinstance(parallel_tool_calls, bool):
        raise ConfigurationError(f"parallel_tool_calls must be True or False, got {parallel_tool_calls!r}")
    if preflight not in ("estimate", "count_tokens"):
        raise ConfigurationError(f"preflight must be 'estimate' or 'count_tokens', got {preflight!r}")


def _beta_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` for the beta endpoint, which takes its betas as an argument, not a header."""
    if "extra_headers" not in params:
        return params
    headers = dict(params["extra_headers"])
    names = headers.pop("anthropic-beta", "")
    return {**params, "extra_headers": headers, "betas": [n for n in names.split(",") if n]}


def _eager(params: dict[str, Any]) -> frozenset[str]:
    """The names of the request's tools whose input streams eagerly."""
    return frozenset(t["name"] for t in params.get("tools", ()) if t.get("eager_input_streaming") and "name" in t)


def _tool_input(event: Any, eager: frozenset[str], calls: dict[int, tuple[str, str]]) -> StreamToolInput | None:
    """A piece of an eager tool call's input (noting which block is which call as they start)."""
    if event.type == "content_block_start":
        block = event.content_block
        if block.type == "tool_use" and block.name in eager:
            calls[event.index] = (block.id, block.name)
    elif event.type == "content_block_delta" and event.delta.type == "input_json_delta" and event.index in calls:
        call_id, name = calls[event.index]
        if event.delta.partial_json:
            return StreamToolInput(call_id, name, event.delta.partial_json)
    return None


def _check_budget(params: dict[str, Any], left: int) -> None:
    """Refuse, before sending, a request larger than what is left of ``max_total_tokens``."""
    estimate = estimate_tokens(params)
    if estimate > left:
        raise TokenBudgetError(
            f"the request holds about {estimate} input tokens (a local estimate: 4 characters a token), more "
            f"than the {max(left, 0)} left of max_total_tokens; it was not sent. Raise max_total_tokens, or "
            "keep tool results and history smaller"
        )


async def _count_tokens(client: Client, params: dict[str, Any], left: int, *, beta: bool) -> None:
    """Refuse, before sending, a request the API counts larger than what is left of ``max_total_tokens``."""
    names = _BETA_COUNT_PARAMS if beta else _COUNT_PARAMS
    messages: Any = client.beta.messages if beta else client.messages
    try:
        counted = (await messages.count_tokens(**{k: v for k, v in params.items() if k in names})).input_tokens
    except (GeneratorExit, asyncio.CancelledError):
        raise
    except Exception as exc:
        raise stream_error(exc) from exc
    if counted > left:
        raise TokenBudgetError(
            f"the request holds {counted} input tokens (counted by the API's count_tokens), more than the "
            f"{max(left, 0)} left of max_total_tokens; it was not sent. Raise max_total_tokens, or keep tool "
            "results and history smaller"
        )


if TYPE_CHECKING:  # mypy --strict (.ci/typecheck) checks that the cloud clients fit ``client``

    def _cloud_clients_fit(vertex: anthropic.AsyncAnthropicVertex, bedrock: anthropic.AsyncAnthropicBedrock) -> None:
        AnthropicModel("claude-opus-4-6@20260205", client=vertex)
        AnthropicModel("anthropic.claude-opus-4-6-v1:0", client=bedrock)
        AnthropicModel("claude-opus-4-6@20260205", client=lambda: vertex)
