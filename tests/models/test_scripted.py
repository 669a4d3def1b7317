"""ScriptedModel: scripts of replies, or a function of the request."""

from __future__ import annotations

import asyncio

import pytest

from loopwright import ConfigurationError, ModelRequest, ScriptedModel, ToolCall
from loopwright.data.errors import ScriptExhaustedError


def test_script_items_become_replies() -> None:
    call = ToolCall(name="t", args={"x": 1})
    model = ScriptedModel(["hi", [call]])
    request = ModelRequest(messages=[])
    first = asyncio.run(model.complete(request))
    second = asyncio.run(model.complete(request))
    assert (first.text, first.stop_reason) == ("hi", "end_turn")
    assert (second.tool_calls, second.stop_reason) == ([call], "tool_use")
    with pytest.raises(ScriptExhaustedError, match="ran out of script: it was asked for reply 3 but holds 2"):
        asyncio.run(model.complete(request))
    assert model.remaining == 0 and len(model.requests) == 3


@pytest.mark.parametrize(
    ("script", "message"), [("hello", "wrap a single text reply in a list"), ([42], "item 0"), ([[]], "item 0")]
)
def test_bad_scripts_are_refused_up_front(script: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ScriptedModel(script)  # type: ignore[arg-type]


def test_a_function_must_return_a_model_response() -> None:
    model = ScriptedModel(lambda request: "nope")  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigurationError, match="must return a ModelResponse"):
        asyncio.run(model.complete(ModelRequest(messages=[])))
