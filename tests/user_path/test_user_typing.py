"""Users' code type-checks as they mean it: ``mypy --strict`` (this environment's) on small user
programs catches a misspelt ``Limits`` field, sees ``ctx.idempotency_key`` in a tool as ``str``,
and finds one ``ScriptItem``."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.slow  # mypy --strict on user snippets

SNIPPETS = {
    "misspelt_limits": """
from loopwright import Limits

Limits(max_iteration=3)
""",
    "right_limits": """
from loopwright import Limits

limits: Limits = Limits(max_iterations=3, max_tool_calls=5)
""",
    "idempotency_key": """
from loopwright import RunContext, tool

paid: list[str] = []


@tool
def pay(amount: int, ctx: RunContext) -> str:
    \"\"\"Pay an invoice.\"\"\"
    key: str = ctx.idempotency_key
    paid.append(ctx.idempotency_key)
    reveal_type(ctx.idempotency_key)
    return f"paid {amount} under {key}"
""",
    "idempotency_key_is_not_an_int": """
from loopwright import RunContext


def tool_body(ctx: RunContext) -> int:
    wrong: int = ctx.idempotency_key
    return wrong
""",
    "script_item": """
from loopwright import ScriptedModel, ToolCall
from loopwright.models.scripted import ScriptItem as ModelsScriptItem
from loopwright.testing import ScriptItem

mine: list[ScriptItem] = ["hello", [ToolCall(name="add", args={"a": 1})]]
theirs: list[ModelsScriptItem] = mine
back: list[ScriptItem] = theirs
model = ScriptedModel(mine)
""",
}


def test_a_misspelt_limits_field_is_a_type_error(mypy_says: dict[str, list[str]]) -> None:
    """``Limits(max_iteration=3)`` (for ``max_iterations``) passed ``mypy --strict``: the
    fields were hidden behind ``**values: Any``."""
    assert any('Unexpected keyword argument "max_iteration"' in line for line in mypy_says["misspelt_limits"]), (
        mypy_says["misspelt_limits"]
    )
    assert mypy_says["right_limits"] == []


def test_the_idempotency_key_in_a_tool_is_a_str(mypy_says: dict[str, list[str]]) -> None:
    """It was ``str | None``: a user's ``key: str = ctx.idempotency_key`` failed mypy --strict."""
    said = mypy_says["idempotency_key"]
    assert [line for line in said if line.startswith("error")] == [], said
    assert any(re.search(r'Revealed type is "(builtins\.)?str"', line) for line in said), said
    wrong = mypy_says["idempotency_key_is_not_an_int"]
    assert any('expression has type "str", variable has type "int"' in line for line in wrong), wrong


def test_there_is_one_script_item(mypy_says: dict[str, list[str]]) -> None:
    """``loopwright.testing.ScriptItem`` and ``loopwright.models.scripted.ScriptItem`` were two
    different types under one name; now the one is the other."""
    import loopwright.models.scripted
    import loopwright.testing

    assert loopwright.testing.ScriptItem is loopwright.models.scripted.ScriptItem
    assert mypy_says["script_item"] == [], mypy_says["script_item"]
