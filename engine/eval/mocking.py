"""Tool mocks for evals, and the check that a set fits the agent it runs on.

A mocked tool keeps its name, description, schema and argument validation (a call with bad
arguments still gets the validation error the model would see); only its body is replaced: a
call whose arguments include a mock's ``args`` gets the mock's ``result`` (or fails with its
``error``). Calls no mock answers run the real tool, unless ``mock_all`` is on: then they fail,
so an eval never touches the world by accident.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from ..data.errors import ToolError
from ..runtime.agent import TRANSFER_TOOL, Agent
from ..runtime.tools import Tool
from .base import EvalSetError
from .cases import EvalCase, EvalSet
from .expect import ToolMock


class MockedToolError(ToolError):
    """The error a mock was told to raise (``error:`` in the set)."""


def _answers(mock: ToolMock, kwargs: dict[str, Any]) -> bool:
    return mock.args is None or all(k in kwargs and kwargs[k] == v for k, v in mock.args.items())


def _mocked(real: Tool, mocks: Sequence[ToolMock], mock_all: bool) -> Tool:
    """``real`` with its body replaced by the mocks (the most specific first)."""
    mine = sorted((m for m in mocks if m.tool == real.name), key=lambda m: m.args is None)  # with args first
    ctx_param = real.ctx_param

    async def body(**kwargs: Any) -> Any:
        ctx = kwargs.pop(ctx_param) if ctx_param is not None else None
        for mock in mine:
            if _answers(mock, kwargs):
                if mock.error is not None:
                    raise MockedToolError(mock.error)
                return mock.result
        if mock_all:
            raise MockedToolError(f"no mock answers {real.name}({kwargs}) and the eval mocks every tool (mock_all)")
        return await real.invoke(kwargs, ctx)

    made = copy.copy(real)
    made.fn, made.is_async = body, True
    return made


def mocked_agent(agent: Agent, mocks: Sequence[ToolMock], mock_all: bool) -> Agent:
    """``agent`` (and every agent below it) with its tools mocked; ``agent`` itself when no
    mock applies and ``mock_all`` is off."""
    if not mocks and not mock_all:
        return agent
    return _mock_tree(agent, mocks, mock_all)


def _mock_tree(agent: Agent, mocks: Sequence[ToolMock], mock_all: bool) -> Agent:
    tools = [
        _mocked(t, mocks, mock_all) if mock_all or any(m.tool == name for m in mocks) else t
        for name, t in agent.tools.items()
        if name != TRANSFER_TOOL
    ]
    subs = [_mock_tree(sub, mocks, mock_all) for sub in agent.sub_agents]
    return agent.replace(tools=tools, sub_agents=subs)


def tool_names(agent: Agent) -> list[str]:
    """Every tool of the agent's tree, sorted."""
    return sorted({name for a in agent.walk() for name in a.tools})


def _named(case: EvalCase, eval_set: EvalSet) -> Iterable[tuple[str, str]]:
    for mock in eval_set.mocks:
        yield mock.tool, "the set's mocks"
    for mock in case.mocks:
        yield mock.tool, f"case {case.name!r} mocks"
    for call in case.expected_calls or ():
        yield call.name, f"case {case.name!r} expects a call of"


def check_fits(agent: Agent, eval_set: EvalSet) -> None:
    """Refuse, before any run, a set that names a tool the agent lacks (listing the agent's
    tools), and predicates or functions named ``module:attr`` that cannot be found."""
    from .base import resolve
    from .trajectory import predicate_of

    have = set(tool_names(agent)) | {TRANSFER_TOOL}
    problems: list[str] = []
    for case in eval_set.cases:
        for name, where in _named(case, eval_set):
            if name not in have:
                problems.append(f"{where} tool {name!r}, which agent {agent.name!r} lacks")
        try:
            for call in case.expected_calls or ():
                predicate_of(call)
            for spec in [*eval_set.evaluators, *case.evaluators]:
                for ref in (
                    getattr(spec, "function", None),
                    getattr(spec, "output_type", None),
                    getattr(spec, "model", None),
                ):
                    if isinstance(ref, str):
                        resolve(ref)
        except LookupError as exc:
            problems.append(f"case {case.name!r}: {exc.args[0]}")
    if problems:
        tools = ", ".join(tool_names(agent)) or "none"
        lines = list(dict.fromkeys(problems))
        raise EvalSetError("\n".join([*lines, f"agent {agent.name!r} has these tools: {tools}"]))


__all__ = ["MockedToolError", "check_fits", "mocked_agent", "tool_names"]
