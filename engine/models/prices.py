"""What model calls cost: a price per model, and the cost of a reply's usage.

Each :class:`Price` gives US dollars per million tokens of each kind a reply's
:class:`~loopwright.Usage` counts (input, output, cache write, cache read), with the date the
price was read and the page it was read from. ``cost_of(model, usage)`` is exact (a
``Decimal``) or ``None``: a model the table does not know, or a kind of token the price does
not cover (a cache write on a model whose cache-write price is not listed), is never guessed.

Ids are matched as written, then without their decorations: a Claude id's cloud prefix,
version suffix and date (``claude-opus-4-6@20260205``, ``claude-haiku-4-5-20251001``; as
:func:`loopwright.models.anthropic.facts.base_id` reads them), an OpenAI snapshot's date
(``gpt-5.4-2026-03-05``), Gemini's ``models/`` prefix. A snapshot the table lists itself wins.

Some models bill a long prompt at other prices (``long_from``: a prompt of more than that many
tokens, counting cache reads and writes, is priced by ``long``); a model whose long-prompt
prices are not listed has no known cost above the threshold. Batch, priority and regional
surcharges, audio input and Gemini's cache storage (billed by the hour) are not covered. Cache
writes made for an hour (Claude's ``cache="1h"``: ``Usage.cache_creation_1h_tokens``) are billed
at twice the input price, as Anthropic's pricing page says, the rest at ``cache_write``.

Register your own with :func:`register_price` (a gateway's model, a negotiated price, a
model this table does not list yet): it wins over the table's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from ..data.errors import ConfigurationError
from ..data.parts import TextPart, ThoughtPart, ToolCall, ToolResult
from .anthropic.facts import base_id

if TYPE_CHECKING:
    from ..data.parts import ModelRequest, Usage

MILLION = Decimal(1_000_000)


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens. ``cache_write``/``cache_read`` None: not listed (a
    reply that wrote or read that many cache tokens has no known cost)."""

    input: Decimal
    output: Decimal
    cache_write: Decimal | None
    cache_read: Decimal | None
    date: str
    """When the price was read (ISO date)."""
    source: str
    """The page it was read from."""
    long_from: int | None = None
    """Prompts of more than this many tokens are billed at ``long`` (None: at any length)."""
    long: Price | None = None

    def cost(self, usage: Usage) -> Decimal | None:
        """What ``usage`` costs at this price (None where a price it needs is not listed)."""
        if self.long_from is not None:
            prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_creation_tokens
            if prompt > self.long_from:
                return None if self.long is None else self.long.cost(usage)
        total = usage.input_tokens * self.input + usage.output_tokens * self.output
        for count, price in (
            (usage.cache_creation_tokens, self.cache_write),
            (usage.cache_read_tokens, self.cache_read),
        ):
            if count:
                if price is None:
                    return None
                total += count * price
        if usage.cache_creation_1h_tokens and self.cache_write is not None:  # (Claude's cache="1h")
            total += usage.cache_creation_1h_tokens * (2 * self.input - self.cache_write)  # twice the input price
        return total / MILLION


def _d(value: str | float | int | Decimal | None, what: str, model: str) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | float | int | Decimal):
        raise ConfigurationError(f"register_price({model!r}): {what} must be a number of US dollars, got {value!r}")
    try:
        number = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    except ArithmeticError:
        raise ConfigurationError(
            f"register_price({model!r}): {what}={value!r} is not a number of US dollars per million tokens"
        ) from None
    if not number.is_finite() or number < 0:
        raise ConfigurationError(f"register_price({model!r}): {what}={value!r} must be a number >= 0")
    return number


def price(
    input: str | float | Decimal,
    output: str | float | Decimal,
    cache_write: str | float | Decimal | None,
    cache_read: str | float | Decimal | None,
    date: str,
    source: str,
    *,
    model: str = "",
    long_from: int | None = None,
    long: Price | None = None,
) -> Price:
    """A :class:`Price` from numbers (a float is read as its shortest decimal: ``0.1`` is 0.1)."""
    found = {
        name: _d(value, name, model)
        for name, value in (
            ("input", input),
            ("output", output),
            ("cache_write", cache_write),
            ("cache_read", cache_read),
        )
    }
    if found["input"] is None or found["output"] is None:
        raise ConfigurationError(f"register_price({model!r}): input and output prices are required")
    return Price(
        found["input"], found["output"], found["cache_write"], found["cache_read"], date, source, long_from, long
    )


_CLAUDE = "https://platform.claude.com/docs/en/about-claude/pricing"
_OPUS_5_5 = "https://platform.claude.com/docs/en/models/opus-5-5/overview"
_SONNET_5_5 = "https://platform.claude.com/docs/en/models/sonnet-5-5/overview"
_SONNET_5 = "https://platform.claude.com/docs/en/models/sonnet-5/overview"
_OPENAI = "https://developers.openai.com/api/docs/pricing"
_GEMINI = "https://ai.google.dev/gemini-api/docs/pricing"

# fmt: off
_TABLE: dict[str, Price] = {
    # Claude: "Model pricing" (base input, 5m cache writes, cache hits and refreshes, output).
    # Dates: when the page was read. Not listed (no cost): claude-haiku-5-5 (priced by prompt
    # length; its rates are on no official page read here), claude-mythos-preview (no price found).
    "claude-fable-5-1":   price("10", "50", "12.50", "0.25", "2026-11-26", _CLAUDE),
    "claude-mythos-5-1":  price("10", "50", "12.50", "0.25", "2026-11-26", _CLAUDE),
    "claude-fable-5":     price("10", "50", "12.50", "1",    "2026-11-26", _CLAUDE),
    "claude-mythos-5":    price("10", "50", "12.50", "1",    "2026-11-26", _CLAUDE),
    "claude-opus-5-5":    price("4",  "20", "5",     "0.20", "2026-11-26", _OPUS_5_5),
    "claude-sonnet-5-5":  price("2",  "10", "2.50",  "0.20", "2026-11-26", _SONNET_5_5),
    "claude-opus-5":      price("5",  "25", "6.25",  "0.50", "2026-11-26", _CLAUDE),
    "claude-sonnet-5":    price("2",  "10", "2.50",  "0.20", "2026-11-26", _SONNET_5),
    "claude-opus-4-8":    price("5",  "25", "6.25",  "0.50", "2026-11-26", _CLAUDE),
    "claude-opus-4-7":    price("5",  "25", "6.25",  "0.50", "2026-11-26", _CLAUDE),
    "claude-opus-4-6":    price("5",  "25", "6.25",  "0.50", "2026-11-26", _CLAUDE),
    "claude-opus-4-5":    price("5",  "25", "6.25",  "0.50", "2026-11-26", _CLAUDE),
    "claude-sonnet-4-6":  price("3",  "15", "3.75",  "0.30", "2026-11-26", _CLAUDE),
    "claude-sonnet-4-5":  price("3",  "15", "3.75",  "0.30", "2026-11-26", _CLAUDE),
    "claude-haiku-4-5":   price("1",  "5",  "1.25",  "0.10", "2026-11-26", _CLAUDE),
    # OpenAI: "Standard" (input, cached input, output); no charge for writing the cache. The
    # standard rates are for prompts under 270K tokens; longer ones are not priced here.
    "gpt-5.5":      price("5",    "30",   "0", "0.50",  "2026-06-04", _OPENAI, long_from=270_000),
    "gpt-5.4":      price("2.50", "15",   "0", "0.25",  "2026-06-04", _OPENAI, long_from=270_000),
    "gpt-5.4-mini": price("0.75", "4.50", "0", "0.075", "2026-06-04", _OPENAI, long_from=270_000),
    "gpt-5.4-nano": price("0.20", "1.25", "0", "0.02",  "2026-06-04", _OPENAI, long_from=270_000),
    # Gemini: "Paid tier" text / image / video input (audio input is billed higher), output
    # including thinking tokens, context caching (where listed); 2.5 Pro's prices are for prompts
    # up to 200K tokens. Cache writes are billed as storage per hour: not a per-token price.
    "gemini-3-flash-preview": price("0.50", "3",    None, "0.05", "2026-07-04", _GEMINI),
    "gemini-2.5-pro":         price("1.25", "10",   None, None,   "2026-11-26", _GEMINI, long_from=200_000),
    "gemini-2.5-flash":       price("0.30", "2.50", None, None,   "2026-11-26", _GEMINI),
    "gemini-2.5-flash-lite":  price("0.10", "0.40", None, None,   "2026-11-26", _GEMINI),
}
# fmt: on
"""The built-in prices (see each entry's ``date`` and ``source``)."""

_REGISTERED: dict[str, Price] = {}
_OPENAI_DATE = re.compile(r"^(?P<id>(?:gpt|o)[a-z0-9.\-]*?)-\d{4}-\d{2}-\d{2}$")


def register_price(
    model: str,
    *,
    input: str | float | Decimal,
    output: str | float | Decimal,
    cache_write: str | float | Decimal | None = None,
    cache_read: str | float | Decimal | None = None,
    date: str = "",
    source: str = "registered",
    long_from: int | None = None,
) -> Price:
    """Price ``model`` (an id as its replies name it) at these US dollars per million tokens;
    it wins over the built-in table. ``cache_write``/``cache_read`` left out: replies that
    wrote or read the cache have no known cost. Returns the price."""
    if not isinstance(model, str) or not model:
        raise ConfigurationError(f"register_price: model must be a model id (a non-empty str), got {model!r}")
    found = price(input, output, cache_write, cache_read, date, source, model=model, long_from=long_from)
    _REGISTERED[model] = found
    return found


def unregister_price(model: str) -> None:
    """Forget a price :func:`register_price` gave ``model`` (the table's, if any, applies again)."""
    _REGISTERED.pop(model, None)


def _candidates(model: str) -> tuple[str, ...]:
    bare = model.removeprefix("models/")
    dated = _OPENAI_DATE.match(bare)
    return (model, bare, base_id(bare), dated.group("id") if dated else bare)


def price_for(model: str | None) -> Price | None:
    """The price of ``model`` (registered first, then the table; None: unknown)."""
    if not model:
        return None
    for tried in _candidates(model):
        found = _REGISTERED.get(tried) or _TABLE.get(tried)
        if found is not None:
            return found
    return None


def cost_of(model: str | None, usage: Usage) -> Decimal | None:
    """What ``usage`` of ``model`` costs in US dollars, exactly; None if it is not known."""
    found = price_for(model)
    return None if found is None else found.cost(usage)


CHARS_PER_TOKEN = 5
"""The estimate before a call counts this many characters of text a token: fewer tokens than
any tokenizer makes of them, so a request is refused only when it surely does not fit."""


def estimate_input_tokens(request: ModelRequest) -> int:
    """The input tokens of ``request``, estimated from below: the characters of its
    instructions, texts, tool calls and results and tool specs, :data:`CHARS_PER_TOKEN` a
    token (images and documents not counted)."""
    chars = sum(len(i.text) for i in request.instructions)
    chars += sum(len(t.name) + len(t.description) + len(json.dumps(t.input_schema)) for t in request.tools)
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, TextPart | ThoughtPart):
                chars += len(part.text)
            elif isinstance(part, ToolCall):
                chars += len(part.name) + len(json.dumps(part.args, default=str))
            elif isinstance(part, ToolResult):
                content = part.content
                chars += len(content) if isinstance(content, str) else len(json.dumps(content, default=str))
    return chars // CHARS_PER_TOKEN


def least_input_cost(model: str | None, request: ModelRequest) -> Decimal | None:
    """What sending ``request`` to ``model`` costs at the least (its estimated input tokens at
    the cheapest input price: a cache read where that is cheaper); None: no price for it."""
    found = price_for(model)
    if found is None:
        return None
    cheapest = found.input if found.cache_read is None else min(found.input, found.cache_read)
    return estimate_input_tokens(request) * cheapest / MILLION


def known_prices() -> dict[str, Price]:
    """Every price known now: the table's, and those registered (which win)."""
    return {**_TABLE, **_REGISTERED}
