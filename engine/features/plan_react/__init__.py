"""plan_react: ADK's PlanReActPlanner — plan, act, reason and answer under tags.

``Agent(..., planner=PlanReAct())`` runs on the core composed with this feature. It adds no
state and no row, only two hooks:

- a request processor: the planning instruction (plan under ``/*PLANNING*/``, act with tool
  calls under ``/*ACTION*/``, reason under ``/*REASONING*/``, revise under ``/*REPLANNING*/``,
  answer under ``/*FINAL_ANSWER*/``); and, since a provider drops thought parts it did not sign
  itself (Claude does), the model's own earlier planning text is sent back to it as the tagged
  text it wrote;
- a reply processor (postprocess): the reply's text is split. Tagged planning, reasoning and
  action text becomes one thought part, kept in the history and hidden from the user; only the
  text after the last ``/*FINAL_ANSWER*/`` is the visible answer; tool calls run as usual.

Replies that break the tag format, handled on purpose (each also reported as an
``error_occurred`` event of kind ``plan_react_format``, except the first, which is not an error):

1. **no tag at all**: the model ignored the format; the reply is taken as it is (its text is
   the answer, or the preamble of its tool calls): nothing is hidden, nothing lost;
2. **tags but no** ``/*FINAL_ANSWER*/`` **and no tool call**: the model forgot the final tag;
   the text of its last tagged section becomes the answer, the sections before it thoughts;
3. ``/*FINAL_ANSWER*/`` **with nothing after it**: as 2, from the sections before the tag;
4. tags in another case or with spaces (``/* final_answer */``) are read as tags;
5. a reply with tool calls and a ``/*FINAL_ANSWER*/``: the calls run and the loop goes on (a
   reply with tool calls is never final); its answer text is the visible text meanwhile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from loopwright.data.events import (
    ErrorInfo,
    ErrorOccurred,
    Instruction,
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThoughtPart,
    ToolCall,
    trusted,
)
from loopwright.data.run_state import RunState
from loopwright.runtime.agent import Agent
from loopwright.runtime.context import RunContext
from loopwright.table.machine import Extension

NAME = "plan_react"
PLANNING, REPLANNING, REASONING, ACTION, FINAL_ANSWER = (
    "/*PLANNING*/",
    "/*REPLANNING*/",
    "/*REASONING*/",
    "/*ACTION*/",
    "/*FINAL_ANSWER*/",
)
TAG = re.compile(r"/\*\s*(PLANNING|REPLANNING|REASONING|ACTION|FINAL_ANSWER)\s*\*/", re.IGNORECASE)

PLANNING_INSTRUCTION = f"""\
When answering the question, try to leverage the available tools to gather the information \
instead of your memorized knowledge.

Follow this process when answering the question: (1) first come up with a plan in natural \
language text format; (2) then use tools to execute the plan and provide reasoning between tool \
calls to make a summary of the current state and next step (tool calls and reasoning should be \
interleaved with each other); (3) in the end, return one final answer.

Follow this format when answering the question: (1) the planning part should be under \
{PLANNING}; (2) the tool calls should be under {ACTION}, and the reasoning parts should be under \
{REASONING}; (3) the final answer part should be under {FINAL_ANSWER}.

Requirements for the plan: the plan is made to answer the user query if following the plan; it \
is a numbered list where each step uses one or more of the available tools. If the initial plan \
cannot be followed (a tool fails, a result is unexpected), revise it under {REPLANNING}.

Requirements for the reasoning: summarise what is known so far and what the next step is, based \
on the plan and the tool results.

Requirements for the final answer: it should be precise and follow any formatting requirements \
of the query; if the query cannot be answered with the available tools, ask the user for the \
information needed."""


@dataclass(frozen=True)
class PlanReAct:
    """The Plan-ReAct planner: ``Agent(..., planner=PlanReAct())``. ``instruction`` replaces
    the planning instruction (keep the five tags in it)."""

    instruction: str = PLANNING_INSTRUCTION

    @property
    def extension(self) -> Extension:
        """The feature an agent with this planner runs on."""
        return PLAN_REACT


# ------------------------------------------------------------------ splitting a reply


def split(text: str, has_calls: bool) -> tuple[str, str, str | None]:
    """``(thought, answer, problem)`` of a reply's text: the hidden planning text, the visible
    answer, and which format rule the reply broke (None: it kept the format, or used no tag)."""
    tags = list(TAG.finditer(text))
    if not tags:
        return "", text, None  # rule 1: untagged, taken as it is
    finals = [m for m in tags if m.group(1).upper() == "FINAL_ANSWER"]
    if finals:
        last = finals[-1]
        answer = text[last.end() :].strip()
        if answer:
            return text[: last.end()], answer, None
        text, tags = text[: last.start()], [m for m in tags if m.start() < last.start()]  # rule 3
        if not tags:
            return "", text.strip(), "an empty /*FINAL_ANSWER*/ section"
        problem = "an empty /*FINAL_ANSWER*/ section"
    else:
        problem = "no /*FINAL_ANSWER*/ section"
    if has_calls:
        return text, "", None
    last = tags[-1]
    return text[: last.end()], text[last.end() :].strip(), problem  # rule 2: the last section answers


def split_reply(response: ModelResponse, rs: RunState, ctx: RunContext) -> ModelResponse:
    """postprocess's processor: tagged text into one thought part, the final answer visible."""
    if ctx.agent.planner is None or not isinstance(ctx.agent.planner, PlanReAct):
        return response
    texts = [p.text for p in response.parts if type(p) is TextPart]
    if not texts:
        return response
    calls = [p for p in response.parts if type(p) is ToolCall]
    thought, answer, problem = split("".join(texts), bool(calls))
    if not thought:
        return response
    if problem is not None:
        ctx.emit(
            ErrorOccurred,
            error=ErrorInfo(
                kind="plan_react_format",
                message=f"the reply broke the Plan-ReAct format ({problem}); its last section is taken as the answer",
            ),
        )
    parts: list[Any] = [p for p in response.parts if type(p) is ThoughtPart]
    parts.append(ThoughtPart(text=thought))
    if answer:
        parts.append(TextPart(text=answer))
    parts += calls
    return response.model_copy(update={"parts": tuple(parts)})


# ------------------------------------------------------------------ the request


_INSTRUCTIONS: dict[str, Instruction] = {}


def _as_written(message: Message) -> Message:
    """An assistant turn with its unsigned thought parts (the planning text this feature split
    off) turned back into the text the model wrote."""
    if message.role != "assistant" or not any(
        type(p) is ThoughtPart and not p.signature and not p.redacted for p in message.parts
    ):
        return message
    parts = tuple(
        TextPart(text=p.text) if type(p) is ThoughtPart and not p.signature and not p.redacted else p
        for p in message.parts
    )
    return trusted(Message, role=message.role, parts=parts, agent=message.agent)


def add_planning(request: ModelRequest, rs: RunState, ctx: RunContext) -> ModelRequest:
    """preprocess's processor: the planning instruction, and the history as the model wrote it."""
    planner = ctx.agent.planner
    if not isinstance(planner, PlanReAct):
        return request
    instruction = _INSTRUCTIONS.get(planner.instruction)
    if instruction is None:
        instruction = _INSTRUCTIONS[planner.instruction] = Instruction(text=planner.instruction, cache=True)
    return request.model_copy(
        update={
            "instructions": (*request.instructions, instruction),
            "messages": [_as_written(m) for m in request.messages],
        }
    )


def plans_with_tags(agent: Agent) -> bool:
    """Some agent of the tree has ``planner=PlanReAct()``."""
    return any(a.planner is not None and a.planner.extension is PLAN_REACT for a in agent.walk())


PLAN_REACT = Extension(name=NAME, request=add_planning, response=split_reply, applies_to=plans_with_tags)
"""Plan-ReAct: the planning instruction and the reply split, as one feature."""
