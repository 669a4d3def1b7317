"""Which model a step calls, and what it costs: the fallback row's switch (``fallback_models``),
the models a run used, the price of each reply (:mod:`loopwright.models.prices`) and the
``max_cost_usd`` check made before a call. The model call itself is :mod:`.model_call`'s."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ..data.errors import ModelError, ResumeError
from ..data.events import ErrorInfo, ErrorOccurred, ModelRequest, ModelResponse, ModelSwitched
from ..data.run_state import RunState
from ..models.prices import cost_of, least_input_cost
from .context import RunContext


def priced(response: ModelResponse, model: Any) -> ModelResponse:
    """``response`` with its usage's ``cost_usd`` (:mod:`loopwright.models.prices`): the price of
    the model the reply names (the one that answered), or else of the ``model`` called (its
    ``model`` attribute: the id it was configured with). A reply whose cost is given already, or
    unknown, comes back as it is."""
    usage = response.usage
    if usage.cost_usd is not None:
        return response
    name = response.model
    if name is None and model is not None:
        name = getattr(model, "model", None)
        if not isinstance(name, str):
            return response
    cost = cost_of(name, usage)
    if cost is None:
        return response
    return response.model_copy(update={"usage": usage.model_copy(update={"cost_usd": cost})})


def model_name(model: Any) -> str:
    """How the run names a model: its ``model`` (an adapter's model id) or ``name`` (a
    ScriptedModel's), else its class."""
    for attribute in ("model", "name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def current_model(rs: RunState, ctx: RunContext) -> Any:
    """The model the active agent is on: its own, or (after the fallback row) the fallback
    ``rs.fallbacks`` names. A saved run whose agent no longer has that fallback is refused."""
    agent = ctx.agent
    n = rs.fallbacks.get(agent.name, 0)
    models = agent.models
    if n >= len(models):
        raise ResumeError(
            f"run {rs.run_id!r} was on fallback model {n} of agent {agent.name!r}, which now has "
            f"{len(models) - 1} fallback_models; resume it with the agent it was saved with"
        )
    return models[n]


def note_model(rs: RunState, model: Any) -> None:
    """The run calls ``model`` now: ``models_used`` names it (once)."""
    rs.model_in_use = model
    name = model_name(model)
    if name not in rs.models_used:
        rs.models_used = [*rs.models_used, name]


def call_estimate(
    rs: RunState, ctx: RunContext, request: ModelRequest | None, last: ModelResponse | None = None
) -> Decimal:
    """What the next call will cost, for a cost budget: the larger of ``request``'s input at the
    least (:func:`~loopwright.models.prices.least_input_cost`: its estimated tokens at the
    model's cheapest input price) and what the last step cost (``last``'s reply); 0 when
    neither is known (a model without a price, before its first reply)."""
    least = None
    if request is not None:
        model = ctx.agent.model if not rs.fallbacks else current_model(rs, ctx)
        least = least_input_cost(model_name(model), request)
    cost = last.usage.cost_usd if last is not None else None
    return max(least or Decimal(0), cost or Decimal(0))


def refuses_cost(rs: RunState, ctx: RunContext, request: ModelRequest, last: ModelResponse | None = None) -> bool:
    """Before a call, with a ``max_cost_usd``: whether ``request`` would cost more than is left
    of it, by :func:`call_estimate` (its input at the least, or the last step's cost: the
    larger). If so the call is not made: ``model_error`` says why, with kind ``cost_budget``,
    and the table ends the run (``reason -> done [request_over_cost_budget]``)."""
    cap, usage = rs.limits.max_cost_usd, rs.usage
    spent = usage.cost_usd
    if spent is None and not usage.requests and not usage.total_tokens:
        spent = Decimal(0)  # (nothing spent yet; an unknown cost so far spends the budget at decide)
    if cap is None or spent is None:
        return False
    estimate = call_estimate(rs, ctx, request, last)
    if spent + estimate <= Decimal(str(cap)):
        return False
    rs.model_error = ErrorInfo(
        kind="cost_budget",
        message=f"the request would cost about ${estimate:.6f} (its input at the least, or the last step's cost), "
        f"more than the ${max(Decimal(str(cap)) - spent, Decimal(0)):.6f} left of max_cost_usd={cap:g}; it was not "
        "sent. Raise max_cost_usd, or keep tool results and history smaller",
    )
    ctx.emit(ErrorOccurred, error=rs.model_error)
    return True


def salvage_over_cost(rs: RunState, ctx: RunContext, request: ModelRequest, last: ModelResponse | None) -> str | None:
    """Before salvage's call: why it would overspend ``max_cost_usd`` of this run or of a run
    above it (:func:`call_estimate`), or None (it fits, or no cost budget binds)."""
    up = ctx.up
    room = up.cost_room() if up is not None and hasattr(up, "cost_room") else None
    cap = rs.limits.max_cost_usd
    if cap is not None:
        spent = rs.usage.cost_usd
        if spent is None:
            spent = Decimal(0) if not rs.usage.requests and not rs.usage.total_tokens else Decimal("Infinity")
        mine = Decimal(str(cap)) - spent
        room = mine if room is None else min(room, mine)
    if room is None:
        return None
    estimate = call_estimate(rs, ctx, request, last)
    if room > 0 and estimate <= room:
        return None
    return (
        f"the salvage call was not made: it would cost about ${estimate:.6f}, and ${max(room, Decimal(0)):.6f} is "
        "left of max_cost_usd (of this run or a run above it)"
    )


def fallback_target(exc: BaseException, rs: RunState, ctx: RunContext) -> str | None:
    """The model the fallback row would switch to after the failed call ``exc`` (None: the
    failure is not one the active agent's ``fallback_models`` cover, or none is left). Covered:
    a retryable error (the table tries the retry row first: this counts once retries are
    spent), or one ``fallback_on`` lists, by HTTP status or exception class."""
    agent = ctx.agent
    n = rs.fallbacks.get(agent.name, 0)
    if n >= len(agent.fallback_models):
        return None
    retryable = isinstance(exc, ModelError) and exc.retryable
    if not retryable:
        status = getattr(exc, "status", None)
        if not any(kind == status if isinstance(kind, int) else isinstance(exc, kind) for kind in agent.fallback_on):
            return None
    return model_name(agent.fallback_models[n])


def switch_model(rs: RunState, ctx: RunContext, failed: ErrorInfo | None) -> bool:
    """After a failed call, whether the table took the fallback row (the engine charged
    ``max_fallbacks`` once more than the run has switched): if so, the active agent moves to
    its next model, and a ``model_switched`` event says so."""
    made = sum(rs.fallbacks.values())
    if rs.charges.get("max_fallbacks", 0) <= made:
        return False
    agent = ctx.agent
    n = rs.fallbacks.get(agent.name, 0)
    if n >= len(agent.fallback_models):
        return False
    before = model_name(agent.models[n])
    rs.fallbacks = {**rs.fallbacks, agent.name: n + 1}
    error = failed or ErrorInfo(kind="model", message="the model call failed")
    ctx.emit(ModelSwitched, from_model=before, to_model=model_name(agent.models[n + 1]), error=error)
    return True
