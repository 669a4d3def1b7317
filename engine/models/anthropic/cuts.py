"""Replies cut short, for :class:`~loopwright.models.anthropic.AnthropicModel`: the budget a
reply cut by ``max_tokens`` before it produced anything usable is asked again with, and the usage
of attempts billed before a call failed (``ModelError.usage``, which the run charges: a cut reply
whose continuation failed, a reply cut by a full context window). No ``anthropic`` import here.
"""

from __future__ import annotations

from ...data.errors import ContextWindowError, ModelError
from ...data.events import ModelResponse, Usage
from ..prices import cost_of
from .facts import ModelFacts
from .mapping import usable

__all__ = ["billed", "next_budget", "plus"]


def next_budget(
    response: ModelResponse, spent: Usage | None, asked: int, budget: int, facts: ModelFacts, model: str
) -> int | None:
    """The ``max_tokens`` to ask again with for a reply cut before it produced anything usable
    (None: ``response`` is the answer). ``asked`` is what this attempt asked, ``budget`` what the
    first did. A reply cut by a full context window, or by a budget that cannot grow, raises,
    carrying the usage billed so far (``spent`` and this reply's)."""
    if response.details.get("stop_reason") == "model_context_window_exceeded":
        # a continuation cannot fit: the token-budget edge, the partial answer kept for salvage
        full = ContextWindowError(
            "the conversation filled the model's context window and the reply was cut "
            "(model_context_window_exceeded); shorten the history or give the agent compaction",
            partial=response.text or None,
        )
        raise billed(full, plus(spent, response.usage), response.model or model)
    if response.stop_reason != "max_tokens" or usable(response):
        return None
    bigger = min(budget * 2, max(facts.max_output, budget))
    if bigger <= asked:
        stuck = ModelError(
            f"the reply was cut by max_tokens={asked} before it produced anything usable "
            "(it stopped inside its thinking or a tool call's input) and the budget cannot grow further; "
            f"raise max_tokens (this model allows {facts.max_output}) or lower the thinking budget",
            retryable=False,
        )
        raise billed(stuck, plus(spent, response.usage), response.model or model)
    return bigger


def plus(spent: Usage | None, usage: Usage) -> Usage:
    """``spent`` (None: nothing yet) and ``usage`` together."""
    return usage if spent is None else spent + usage


def billed(exc: ModelError, spent: Usage | None, model: str) -> ModelError:
    """``exc`` carrying the usage of the attempts billed before it (``ModelError.usage``: the run
    charges it), priced by ``model`` when its price is known."""
    if spent is None:
        return exc
    if spent.cost_usd is None and (cost := cost_of(model, spent)) is not None:
        spent = spent.model_copy(update={"cost_usd": cost})
    exc.usage = spent if exc.usage is None else spent + exc.usage
    return exc
