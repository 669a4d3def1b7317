"""The event log keeps a reply's usage as its counts, not as the ``Usage`` object (issue 38,
memory a run): the events and the result rebuilt from it are the same, field for field and
with the same fields set, and a store's compact form still knows the run's latest reply."""

from __future__ import annotations

import asyncio
import gc
import weakref
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from loopwright import Agent, ModelRequest, ModelResponse, Runner, ToolCall, Usage, tool
from loopwright.data.events import is_reply, reply_of, reply_values
from loopwright.data.parts import ZERO_USAGE, usage_counts, usage_of
from loopwright.data.reply_builder import build_reply, build_usage
from loopwright.data.result import RunResult

_COUNTS = st.integers(min_value=0, max_value=2**40)
_USAGES = st.fixed_dictionaries(
    {},
    optional={
        "input_tokens": _COUNTS,
        "output_tokens": _COUNTS,
        "cache_read_tokens": _COUNTS,
        "cache_creation_tokens": _COUNTS,
        "requests": _COUNTS,
        "cost_usd": st.none() | st.decimals(min_value=0, max_value=10**6, places=6, allow_nan=False),
        "cache_creation_1h_tokens": _COUNTS,
        "server_tool_uses": _COUNTS,
    },
)


@given(fields=_USAGES, built=st.booleans())
def test_a_usage_kept_as_its_counts_comes_back_equal_with_its_fields_set(fields: dict[str, Any], built: bool) -> None:
    usage = build_usage(**fields) if built else Usage(**fields)
    names = set(usage.__pydantic_fields_set__)
    kept = usage_counts(usage)
    again = usage_of(kept)
    assert again == usage
    assert again.__pydantic_fields_set__ == usage.__pydantic_fields_set__ == names
    assert again.model_fields_set == names
    assert again.model_dump() == usage.model_dump() and again.total_tokens == usage.total_tokens
    if usage is not ZERO_USAGE:
        assert type(kept) is tuple and not any(isinstance(v, Usage) for v in kept)
    reply = build_reply((), usage, "end_turn")
    assert is_reply(reply_values(reply), reply)  # the store's head still knows the latest reply
    assert reply_of(reply_values(reply)) == reply


def test_the_zero_usage_is_kept_as_itself() -> None:
    assert usage_counts(ZERO_USAGE) is ZERO_USAGE and usage_of(ZERO_USAGE) is ZERO_USAGE


@tool
async def noop(i: int) -> int:
    """Return i."""
    return i


class Model:
    """Three tool-call replies with usage (one priced), then text."""

    def __init__(self) -> None:
        self.usages: list[weakref.ref[Usage]] = []
        self.given: list[Usage] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        turn = len(request.messages) // 2
        usage = build_usage(input_tokens=turn + 300, output_tokens=7, requests=1)
        if turn == 1:
            usage = Usage(input_tokens=5, cost_usd=Decimal("0.000123"))
        self.usages.append(weakref.ref(usage))
        self.given.append(usage.model_copy())
        if turn < 3:
            return build_reply((ToolCall(id=f"c{turn}", name="noop", args={"i": turn}),), usage, "tool_use")
        return build_reply((), usage, "end_turn")


def test_a_finished_run_keeps_no_usage_object_of_its_past_replies_and_its_events_are_the_same() -> None:
    model = Model()
    kept: list[RunResult] = []

    async def main() -> None:  # not run_sync: asyncio.run's task repr would build every event
        kept.append(await Runner(Agent(name="a", model=model, tools=[noop])).run("go"))

    asyncio.run(main())
    gc.collect()
    result = kept[0]
    log = result._log
    in_log = [v for e in log.entries if type(e) is tuple for v in e if isinstance(v, Usage)]
    assert in_log == []  # before: one Usage object a reply, the log its only holder
    assert [r() is None for r in model.usages] == [True, True, True, False]  # the last: the run's response
    responded = [e.response.usage for e in result.events if e.type == "model_responded"]
    assert responded == model.given
    assert [u.__pydantic_fields_set__ for u in responded] == [u.__pydantic_fields_set__ for u in model.given]
    assert result.usage.input_tokens == sum(u.input_tokens for u in model.given)
    assert result.usage.cost_usd is None  # three of the four replies have no price
