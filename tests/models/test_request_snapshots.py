"""A request is a snapshot: a model that keeps every request it was sent still sees, after the
run goes on (more turns, compaction, a transfer to another agent, a resume), exactly the
messages each request held when it was sent; making one stays O(1) (a view of the run's
append-only history)."""

from __future__ import annotations

from typing import Any

import pytest

from loopwright import (
    Agent,
    Limits,
    Message,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    TextPart,
    ToolCall,
    Usage,
    approve,
    tool,
)
from loopwright.data.events import History
from loopwright.features import Compaction
from loopwright.features.compaction import SUMMARY_INSTRUCTION
from tests.helpers import add


class Keeper:
    """Keeps each request object, and a deep copy of its messages as they were when sent."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.kept: list[tuple[ModelRequest, list[Message]]] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.kept.append((request, [m.model_copy(deep=True) for m in request.messages]))
        reply = self.replies.pop(0)
        if isinstance(reply, str):
            return ModelResponse(parts=(TextPart(text=reply),), usage=Usage(input_tokens=1000, requests=1))
        return ModelResponse(parts=tuple(reply), stop_reason="tool_use", usage=Usage(input_tokens=1000, requests=1))

    def check(self) -> None:
        for request, sent in self.kept:
            assert list(request.messages) == sent, "a kept request shows messages it was not sent with"
            assert len(request.messages) == len(sent) and request.messages == sent


def call(a: int) -> list[ToolCall]:
    return [ToolCall(name="add", args={"a": a, "b": 1})]


def test_kept_requests_do_not_grow_as_the_run_goes_on() -> None:
    model = Keeper([call(1), call(2), call(3), "done"])
    result = Runner(Agent(name="a", model=model, tools=[add])).run_sync("go")
    assert result.outcome == "final" and len(model.kept) == 4
    model.check()
    assert [len(r.messages) for r, _ in model.kept] == [1, 3, 5, 7]
    # a request's messages are read-only
    first = model.kept[0][0].messages
    assert isinstance(first, History) and not hasattr(first, "append")
    with pytest.raises(TypeError):
        first[0] = first[0]  # type: ignore[index]


def test_scripted_model_requests_are_what_was_sent() -> None:
    model = ScriptedModel([call(1), call(2), "done"])
    Runner(Agent(name="a", model=model, tools=[add])).run_sync("go")
    assert [len(r.messages) for r in model.requests] == [1, 3, 5]
    assert model.requests[0].messages == [Message(role="user", parts=(TextPart(text="go"),))]


def test_compaction_leaves_earlier_requests_as_they_were_sent() -> None:
    replies: list[Any] = [call(1), call(2), call(3), call(4), "done"]
    model = Keeper(replies)

    def summary(request: ModelRequest, ctx: Any) -> ModelResponse | None:
        if request.instructions and request.instructions[0].text == SUMMARY_INSTRUCTION:
            return ModelResponse(parts=(TextPart(text="Added numbers so far."),))
        return None

    agent = Agent(
        name="a",
        model=model,
        tools=[add],
        compaction=Compaction(max_tokens=500, keep_last=2),
        before_model=summary,
        limits=Limits(max_iterations=10),
    )
    result = Runner(agent).run_sync("go")
    assert result.outcome == "final" and "compact" in result.trace
    model.check()
    # the history was rewritten (a summary replaced the older turns), yet each request shows its own
    assert any("Summary of the conversation" in str(m.parts) for r, _ in model.kept for m in r.messages)
    assert not any("Summary" in str(m.parts) for m in model.kept[1][0].messages)


def test_a_transfer_leaves_earlier_requests_as_they_were_sent() -> None:
    back = Keeper(["billing answered"])
    front = Keeper([[ToolCall(name="transfer_to_agent", args={"agent_name": "billing", "task": "refund"})]])
    billing = Agent(name="billing", model=back, description="refunds")  # type: ignore[arg-type]
    root = Agent(name="front", model=front, sub_agents=[billing])  # type: ignore[arg-type]
    result = Runner(root).run_sync("I want a refund")
    assert result.outcome == "final" and result.output == "billing answered"
    front.check()
    back.check()
    assert len(front.kept[0][0].messages) == 1 and len(result.messages) > 1


def test_a_resumed_run_leaves_requests_before_the_suspension_as_they_were() -> None:
    @tool(requires_confirmation=True)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    model = Keeper([[ToolCall(name="pay", args={"amount": 5})], "paid"])
    runner = Runner(Agent(name="a", model=model, tools=[pay]))
    first = runner.run_sync("pay 5")
    assert first.outcome == "suspended"
    done = runner.resume_sync(first, {first.pending[0].call_id: approve()})
    assert done.outcome == "final"
    model.check()
    assert [len(r.messages) for r, _ in model.kept] == [1, 3]


def test_a_history_view_reads_like_the_list_it_shows() -> None:
    items = [Message(role="user", parts=(TextPart(text=str(i)),)) for i in range(5)]
    view = History(items, 3)
    items.append(items[0])
    assert len(view) == 3 and list(view) == items[:3] and view[-1] is items[2] and view[1:] == items[1:3]
    assert list(reversed(view)) == items[2::-1] and view == tuple(items[:3]) and view != items
    with pytest.raises(IndexError, match="out of range"):
        view[3]
    request = ModelRequest(messages=items[:2])
    assert ModelRequest.model_validate_json(ModelRequest.model_construct(messages=view).model_dump_json()) == (
        ModelRequest(messages=items[:3])
    )
    assert request.model_dump()["messages"][0]["parts"][0]["text"] == "0"
