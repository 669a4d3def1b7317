"""The demo agents (the module behind :mod:`loopwright.demo`)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from ..data.events import Message, ModelRequest, ModelResponse, TextPart, ToolCall, ToolResult, Usage
from ..data.limits import Limits
from ..models.base import Model
from ..models.scripted import ScriptedModel
from ..runtime.agent import Agent
from ..runtime.context import RunContext
from ..runtime.tools import Tool, tool

__all__ = ["DEMO_INPUT", "DEMO_OPTIONS", "HELPDESK_INPUT", "demo_agent", "demo_tools", "helpdesk_agent"]

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


def _results(messages: Sequence[Message]) -> dict[str, list[ToolResult]]:
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


class TripAnswer(BaseModel):
    """The demo's structured answer (``loopwright demo --output-type``)."""

    affordable: bool
    total_usd: float
    warmer_city: str


DEMO_OPTIONS = ("plan-react", "planner", "observer", "output-type")
"""The composed features ``loopwright demo`` can switch on (``--plan-react``, ...)."""


def _with_options(request: ModelRequest) -> ModelResponse:
    """The demo's "model" with the options on: it answers the planner and the observer, writes
    Plan-ReAct's tags when asked to, and its final answer as JSON when a schema is asked for."""
    from ..features.observer import OBSERVER_INSTRUCTION
    from ..features.plan_react import PLANNING_INSTRUCTION
    from ..features.planner import PLANNER_INSTRUCTION
    from ..features.structured_output import instruction_for

    usage = Usage(input_tokens=30 * len(request.messages), output_tokens=20, requests=1)
    first = request.instructions[0].text if request.instructions else ""
    seen = _results(request.messages)
    if first == PLANNER_INSTRUCTION:
        steps = [("get_weather", "compare the weather in Lisbon and Porto"), ("hotel_price", "price 3 nights")]
        steps.append(("convert_currency", "convert the total to USD"))
        plan = [{"description": d, "status": "done" if tool in seen else "pending"} for tool, d in steps]
        return ModelResponse(parts=(TextPart(text=json.dumps({"steps": plan})),), usage=usage)
    if first == OBSERVER_INSTRUCTION:
        return ModelResponse(parts=(TextPart(text='{"verdict": "ok", "correction": null}'),), usage=usage)
    response = _reply(request)
    text = response.text
    if not response.tool_calls and instruction_for(TripAnswer) in request.instructions:
        usd = seen["convert_currency"][-1].content
        warmer = re.search(r"(Lisbon|Porto) is warmer", text)
        answer = TripAnswer(affordable=text.startswith("Yes"), total_usd=usd, warmer_city=warmer[1] if warmer else "")
        text = answer.model_dump_json()
    if any(i.text == PLANNING_INSTRUCTION for i in request.instructions):
        if response.tool_calls:
            head = "/*PLANNING*/\n1. Weather in both cities. 2. Hotel price. 3. Convert to USD.\n" if not seen else ""
            text = f"{head}/*ACTION*/\n{text or 'Next step.'}"
        else:
            text = f"/*REASONING*/\nI have the weather, the price and the rate.\n/*FINAL_ANSWER*/\n{text}"
    parts = (TextPart(text=text), *response.tool_calls) if text else tuple(response.tool_calls)
    return response.model_copy(update={"parts": parts})


def demo_agent(model: Model | None = None, *, delay_s: float = 0.0, options: Sequence[str] = ()) -> Agent:
    """The demo agent, on the scripted model unless another ``model`` is given. ``options``
    switches on composed features (see :data:`DEMO_OPTIONS`)."""
    from ..features import Observer, Planner, PlanReAct

    unknown = sorted(set(options) - set(DEMO_OPTIONS))
    if unknown:
        raise ValueError(f"unknown demo options {unknown}; use {', '.join(DEMO_OPTIONS)}")
    if "plan-react" in options and "planner" in options:
        raise ValueError("an agent has one planner: choose --plan-react or --planner")
    scripted = ScriptedModel(_with_options if options else _reply, name="demo-script")
    planner = PlanReAct() if "plan-react" in options else Planner() if "planner" in options else None
    return Agent(
        name="trip_assistant",
        model=model or scripted,
        instruction="You help travellers check costs. Use the tools; never guess prices or weather.",
        tools=demo_tools(delay_s),
        limits=Limits(max_iterations=8, max_tool_calls=12, tool_timeout_s=10),
        planner=planner,
        observer=Observer(every=2) if "observer" in options else None,
        output_type=TripAnswer if "output-type" in options else None,
    )


# ---------------------------------------------------------------- the multi-agent help desk

HELPDESK_INPUT = "I was charged twice for my Pro plan this month, and I'd like to add 5 seats."
_CHARGES = [
    {"id": "ch_1", "amount_usd": 49.0, "plan": "pro", "date": "2026-11-01"},
    {"id": "ch_2", "amount_usd": 49.0, "plan": "pro", "date": "2026-11-01"},
]


def _own_results(request: ModelRequest) -> dict[str, Any]:
    """This agent's own tool results so far, by tool name (the latest wins)."""
    return {name: results[-1].content for name, results in _results(request.messages).items()}


def _last_user_text(request: ModelRequest) -> str:
    users = [m for m in request.messages if m.role == "user" and m.text]
    return users[-1].text if users else ""


def _transfer(agent: str, task: str, usage: Usage) -> ModelResponse:
    return ModelResponse(
        parts=(ToolCall(name="transfer_to_agent", args={"agent_name": agent, "task": task}),),
        stop_reason="tool_use",
        usage=usage,
    )


def _dispatcher(request: ModelRequest) -> ModelResponse:
    usage = Usage(input_tokens=30 * len(request.messages), output_tokens=20, requests=1)
    handed_back = _last_user_text(request)
    if "handed this conversation to you]" in handed_back:
        summary = handed_back.split("] ", 1)[1]
        return ModelResponse(parts=(TextPart(text=f"All sorted: {summary}."),), stop_reason="end_turn", usage=usage)
    return _transfer("billing", "Customer cus_42 reports a duplicate Pro charge this month; refund it.", usage)


def _billing(request: ModelRequest) -> ModelResponse:
    usage = Usage(input_tokens=30 * len(request.messages), output_tokens=20, requests=1)
    seen = _own_results(request)
    if "find_charges" not in seen:
        return ModelResponse(parts=(ToolCall(name="find_charges", args={"customer_id": "cus_42"}),), usage=usage)
    if "refund" not in seen:
        charges = seen["find_charges"]
        duplicate = charges[-1]["id"] if isinstance(charges, list) and len(charges) > 1 else "none"
        return ModelResponse(parts=(ToolCall(name="refund", args={"charge_id": duplicate}),), usage=usage)
    refund = seen["refund"]
    task = f"Customer cus_42 wants 5 more Pro seats.\nBilling: {refund}"
    return _transfer("sales", task, usage)  # a peer transfer


def _sales(request: ModelRequest) -> ModelResponse:
    usage = Usage(input_tokens=30 * len(request.messages), output_tokens=20, requests=1)
    seen = _own_results(request)
    if "quote_seats" not in seen:
        return ModelResponse(parts=(ToolCall(name="quote_seats", args={"plan": "pro", "seats": 5}),), usage=usage)
    quote = seen["quote_seats"]
    billing_note = _last_user_text(request).split("\nBilling: ", 1)[-1]
    return _transfer("dispatcher", f"{billing_note}; {quote}", usage)  # back to the parent


def helpdesk_agent(delay_s: float = 0.0) -> Agent:
    """ADK's help-desk example as an agent tree: a dispatcher with billing, support and sales
    sub-agents, each on its own scripted model."""

    @tool
    async def find_charges(customer_id: str) -> list[dict[str, Any]]:
        """This month's charges of a customer."""
        await asyncio.sleep(delay_s)
        return _CHARGES if customer_id == "cus_42" else []

    @tool
    async def refund(charge_id: str) -> str:
        """Refund one charge in full."""
        await asyncio.sleep(delay_s)
        charge = next((c for c in _CHARGES if c["id"] == charge_id), None)
        if charge is None:
            raise LookupError(f"no charge {charge_id!r}")
        return f"refunded duplicate charge {charge_id} ({charge['amount_usd']:.2f} USD)"

    @tool
    async def quote_seats(plan: str, seats: int) -> str:
        """Monthly price of extra seats on a plan."""
        await asyncio.sleep(delay_s)
        return f"{seats} extra {plan} seats cost {seats * 49:.2f} USD a month"

    @tool
    def reset_password(email: str) -> str:
        """Send a password reset link."""
        return f"reset link sent to {email}"

    limits = Limits(max_iterations=12, max_transfers=4)
    billing = Agent(
        name="billing",
        model=ScriptedModel(_billing),
        description="charges, refunds, invoices",
        instruction="You handle billing.",
        tools=[find_charges, refund],
        limits=limits,
    )
    support = Agent(
        name="support",
        model=ScriptedModel(["How can I help?"]),
        description="log-in and technical problems",
        instruction="You fix technical problems.",
        tools=[reset_password],
        limits=limits,
    )
    sales = Agent(
        name="sales",
        model=ScriptedModel(_sales),
        description="plans, seats and quotes",
        instruction="You sell plans and seats.",
        tools=[quote_seats],
        limits=limits,
        history="isolated",
    )
    return Agent(
        name="dispatcher",
        model=ScriptedModel(_dispatcher),
        description="routes customers to the right team",
        instruction="Route each request to the team that can solve it; answer once they are done.",
        sub_agents=[billing, support, sales],
        limits=limits,
    )
