"""``ctx.deps`` is typed: ``mypy --strict`` on user snippets sees ``RunContext[Deps]`` and
``ToolContext[Deps]`` give ``Deps``, catches a wrong use, and still takes a bare ``RunContext``."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # mypy --strict on user snippets

SNIPPETS = {
    "deps_typed": """
from dataclasses import dataclass

from loopwright import Agent, RunContext, Runner, ScriptedModel, tool
from loopwright.runtime.tools import ToolContext


@dataclass
class Deps:
    base_url: str
    retries: int


@tool
def fetch(path: str, ctx: ToolContext[Deps]) -> str:
    \"\"\"Fetch a page.\"\"\"
    url: str = ctx.deps.base_url + path
    reveal_type(ctx.deps)
    return url


def instruction(ctx: RunContext[Deps]) -> str:
    reveal_type(ctx.deps)
    return f"retry {ctx.deps.retries} times"


agent = Agent(name="a", model=ScriptedModel(["hi"]), instruction=instruction, tools=[fetch])
result = Runner(agent).run_sync("go", deps=Deps(base_url="https://x", retries=2))
""",
    "deps_wrong": """
from dataclasses import dataclass

from loopwright import RunContext


@dataclass
class Deps:
    base_url: str


def body(ctx: RunContext[Deps]) -> int:
    wrong: int = ctx.deps.base_url
    return wrong
""",
    "deps_bare": """
from loopwright import RunContext


def body(ctx: RunContext) -> str:
    return str(ctx.deps)
""",
}


def test_deps_are_typed_in_tools_and_instructions(mypy_says: dict[str, list[str]]) -> None:
    said = mypy_says["deps_typed"]
    revealed = [line for line in said if "Revealed type" in line]
    assert len(revealed) == 2 and all('"deps_typed.Deps"' in line for line in revealed), said
    assert [line for line in said if "Revealed type" not in line] == [], said


def test_a_wrong_use_of_deps_is_a_type_error(mypy_says: dict[str, list[str]]) -> None:
    said = mypy_says["deps_wrong"]
    assert any("Incompatible types in assignment" in line for line in said), said


def test_a_bare_run_context_still_type_checks(mypy_says: dict[str, list[str]]) -> None:
    assert mypy_says["deps_bare"] == [], mypy_says["deps_bare"]
