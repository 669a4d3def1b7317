"""The bundled demo agent: a trip-cost assistant that does real work on a scripted model.

The scripted "model" is a function of the request: it reads the tool results already in the
history and decides the next step from them, so the final answer is computed from what the
tools returned. The run shows one parallel step (two weather look-ups at once), one tool error
the model recovers from (bad arguments, then corrected), and a final answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .agent import Agent
from .events import Message, ModelRequest, ModelResponse, TextPart, ToolCall, ToolResult, Usage
from .limits import Limits
from .models.base import Model
from .models.scripted import ScriptedModel
from .run_state import RunContext
from .tools import Tool, tool

DEMO_INPUT = "I have 900 USD. Can I afford 3 nights in Lisbon, and is it warmer there or in Porto?"

_WEATHER = {"lisbon": 24.0, "porto": 19.5, "madrid": 27.0}
_NIGHTLY_EUR = {"lisbon": 180.0, "porto": 120.0, "madrid": 150.0}
_RATES = {("EUR", "USD"): 1.08, ("USD", "EUR"): 0.93}


def demo_tools(delay_s: float = 0.0) -> list[Tool]:
    """The demo's tools; ``delay_s`` makes each look-up take that long (for the live view)."""

    @tool
    async def get_weather(city: str) -> dict[str, Any]:
        """Current temperature for a city.

        Args:
            city: City name, e.g. "Lisbon".
        """
        await asyncio.sleep(delay_s)
        key = city.strip().lower()
        if key not in _WEATHER:
            raise LookupError(f"no weather data for {city!r}; known cities: {', '.join(sorted(_WEATHER))}")
        return {"city": city, "celsius": _WEATHER[key]}

    @tool
    async def hotel_price(city: str, nights: int, ctx: RunContext) -> dict[str, Any]:
        """Total price in EUR of a mid-range hotel.

        Args:
            city: City name.
            nights: Number of nights (a whole number).
        """
        await asyncio.sleep(delay_s)
        total = _NIGHTLY_EUR[city.strip().lower()] * nights
        ctx.state["last_quote_eur"] = total
        return {"city": city, "nights": nights, "total_eur": total}

    @tool
    def convert_currency(amount: float, from_currency: str, to_currency: str) -> float:
        """Convert an amount between currencies (EUR, USD).

        Args:
            amount: The amount to convert.
            from_currency: ISO code to convert from.
            to_currency: ISO code to convert to.
        """
        rate = _RATES[(from_currency.upper(), to_currency.upper())]
        return round(amount * rate, 2)

    return [get_weather, hotel_price, convert_currency]


def _results(messages: list[Message]) -> dict[str, list[ToolResult]]:
    found: dict[str, list[ToolResult]] = {}
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolResult):
                found.setdefault(part.name, []).append(part)
    return found


def _reply(request: ModelRequest) -> ModelResponse:
    """The demo's "model": decides each step from the tool results it has seen."""
    seen = _results(request.messages)
    usage = Usage(input_tokens=40 * len(request.messages), output_tokens=25, requests=1)
    if "get_weather" not in seen:
        calls = [ToolCall(name="get_weather", args={"city": c}) for c in ("Lisbon", "Porto")]
        return ModelResponse(parts=(TextPart(text="Checking both cities at once."), *calls), usage=usage)
    hotel = seen.get("hotel_price", [])
    if not hotel:  # first try passes nights as words: the tool's validation rejects it
        call = ToolCall(name="hotel_price", args={"city": "Lisbon", "nights": "three"})
        return ModelResponse(parts=(call,), stop_reason="tool_use", usage=usage)
    if all(r.is_error for r in hotel):  # recover: read the error, fix the argument
        call = ToolCall(name="hotel_price", args={"city": "Lisbon", "nights": 3})
        return ModelResponse(parts=(TextPart(text="nights must be a number; retrying."), call), usage=usage)
    quote = next(r for r in hotel if not r.is_error).content
    if "convert_currency" not in seen:
        assert isinstance(quote, dict)
        args = {"amount": quote["total_eur"], "from_currency": "EUR", "to_currency": "USD"}
        return ModelResponse(parts=(ToolCall(name="convert_currency", args=args),), usage=usage)
    usd = seen["convert_currency"][-1].content
    temps: dict[str, float] = {}
    for r in seen["get_weather"]:
        if isinstance(r.content, dict) and isinstance(r.content["celsius"], int | float):
            temps[str(r.content["city"])] = float(r.content["celsius"])
    warmer = max(temps, key=temps.__getitem__)
    assert isinstance(usd, int | float)
    verdict = "Yes" if usd <= 900 else "No"
    text = (
        f"{verdict}: 3 nights in Lisbon cost about {usd:.2f} USD, "
        f"{'within' if usd <= 900 else 'over'} your 900 USD. "
        f"{warmer} is warmer ({temps[warmer]:g} °C vs "
        f"{', '.join(f'{c} {t:g} °C' for c, t in temps.items() if c != warmer)})."
    )
    return ModelResponse(parts=(TextPart(text=text),), stop_reason="end_turn", usage=usage)


def demo_agent(model: Model | None = None, *, delay_s: float = 0.0) -> Agent:
    """The demo agent, on the scripted model unless another ``model`` is given."""
    return Agent(
        name="trip_assistant",
        model=model or ScriptedModel(_reply, name="demo-script"),
        instruction="You help travellers check costs. Use the tools; never guess prices or weather.",
        tools=demo_tools(delay_s),
        limits=Limits(max_iterations=8, max_tool_calls=12, tool_timeout_s=10),
    )
