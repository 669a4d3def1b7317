"""compaction: older turns of the history replaced by a summary once it grows past a threshold.

``Agent(..., compaction=Compaction(max_tokens=50_000, keep_last=6))`` runs on the core composed
with this feature. It adds:

- the state ``compact``, entered from ``decide`` instead of going round when the history is too
  long (``history_too_long``: the latest model call's input — what the provider counted, cache
  included — is at least ``max_tokens``), bounded by ``Limits(max_compactions=...)`` (default 3)
  and, like every way back into the loop, by every core budget and by loop detection's guard;
  then ``compact -> preprocess``;
- its handler: one tool-less model call summarises the older turns; the history becomes the
  user's first message with the summary appended, then the last ``keep_last`` messages or a
  few more, verbatim. The cut is always just before one of the model's turns, so every tool
  call keeps its result (a call and its answer are never separated). The summary call's
  tokens count in the run's usage and token budget. A model error, or a history too short to
  cut, leaves the history as it is (an ``error_occurred`` event of kind ``compact``); each
  compaction is a ``compacted`` event;
- its slice :class:`Compactions` and its budget ``max_compactions``.

Not in an agent tree whose agents have isolated histories (their branches are positions in the
history; the handler then leaves it alone and says so). Compaction rewrites the history: a
store that saves runs append-only (issue 10) must record it as a new base, not as an append.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopwright.data.events import (
    Compacted,
    ErrorInfo,
    ErrorOccurred,
    Instruction,
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    trusted,
)
from loopwright.data.run_state import RunState
from loopwright.runtime.agent import Agent
from loopwright.runtime.context import RunContext
from loopwright.runtime.model_call import side_call
from loopwright.table.budgets import Budget
from loopwright.table.machine import Extension, detour

from ..loop_detection import not_repeating_calls

NAME = "compaction"
COMPACT = "compact"

SUMMARY_INSTRUCTION = """\
You compact the conversation of an agent that works with tools, so it can go on with less \
context. Summarise the conversation so far: the user's request and its constraints, what was \
done, the facts the tool results established (exact numbers, names, ids), what failed and why, \
and what is left to do. Be complete but brief; plain text, no tool calls."""


@dataclass(frozen=True)
class Compaction:
    """History compaction: ``Agent(..., compaction=Compaction(max_tokens=..., keep_last=...))``.

    ``max_tokens``: compact once the latest model call's input reaches this many tokens;
    ``keep_last``: messages kept verbatim at the end (a few more if the cut would split a tool
    call from its result); ``instruction`` replaces the summariser's prompt."""

    max_tokens: int = 50_000
    keep_last: int = 6
    instruction: str = SUMMARY_INSTRUCTION

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"Compaction(max_tokens={self.max_tokens!r}): give a positive whole number of tokens")
        if not isinstance(self.keep_last, int) or self.keep_last < 1:
            raise ValueError(f"Compaction(keep_last={self.keep_last!r}): keep at least the last message")

    @property
    def extension(self) -> Extension:
        """The feature an agent with this option runs on."""
        return COMPACTION


@dataclass(slots=True)
class Compactions:
    """The compaction slice of a run's state (``RunState.features["compaction"]``)."""

    threshold: int = 0
    """The active agent's ``max_tokens`` (0: it does not compact), as the guard reads it."""
    size: int = 0
    """Input tokens of the latest model call (0 after a compaction, until the next call)."""
    replaced: int = 0
    """Messages replaced by summaries so far."""
    summary: str = ""
    """The latest summary."""


def compactions(rs: RunState) -> Compactions:
    return rs.features[NAME]  # type: ignore[no-any-return]


def history_too_long(rs: RunState) -> bool:
    """The latest model call's input reached the active agent's compaction threshold."""
    c = rs.features.get(NAME)
    return c is not None and c.threshold > 0 and c.size >= c.threshold


COMPACTIONS = Budget(
    "max_compactions", "history compactions (max_compactions={value})", "within_compaction_budget", cycle=True
)
within_compaction_budget = COMPACTIONS.guard


def cut_point(messages: list[Message], keep_last: int) -> int:
    """Where the verbatim tail starts: at or before ``len - keep_last``, just before one of
    the model's turns (so no tool result loses its call); 0 when nothing can be cut."""
    i = max(len(messages) - keep_last, 1)
    while i > 1 and messages[i].role != "assistant":
        i -= 1
    return i if i > 1 and messages[i].role == "assistant" else 0


async def compact(rs: RunState, ctx: RunContext) -> None:
    """Replace the older turns by a summary (one tool-less model call).

    Reads ``messages``; writes ``messages``, ``usage`` and the slice."""
    c = compactions(rs)
    option = ctx.agent.compaction
    if not isinstance(option, Compaction):
        return
    transfers = rs.features.get("multi_agent")
    at = cut_point(rs.messages, option.keep_last)
    why = None
    if transfers is not None and getattr(transfers, "branch_start", None):
        why = "agents with isolated histories hold positions in it"
    elif at == 0:
        why = f"it is too short to cut (keep_last={option.keep_last})"
    if why is not None:
        c.size = 0  # not again until the next model call says the history is long
        ctx.emit(ErrorOccurred, error=ErrorInfo(kind="compact", message=f"the history was not compacted: {why}"))
        return
    older, kept = rs.messages[:at], rs.messages[at:]
    response = await side_call(ctx, (Instruction(text=option.instruction),), older, "compact")
    if response is None:
        c.size = 0
        return
    summary = response.text.strip()
    first = older[0]
    note = TextPart(text=f"[Summary of the conversation so far; older turns were compacted]\n{summary}")
    head = trusted(Message, role="user", parts=(*first.parts, note), agent=first.agent)
    rs.messages = [head, *kept]  # a new list: the history is append-only (earlier requests keep theirs)
    c.replaced += len(older) - 1
    c.summary, c.size = summary, 0
    ctx.emit(Compacted, replaced=len(older), kept=len(kept), summary=summary)


def measure(request: ModelRequest, rs: RunState, ctx: RunContext) -> ModelRequest:
    """preprocess's processor: keep the slice's threshold to the active agent's option, and
    its size to what the provider counted for the latest call."""
    c = compactions(rs)
    option = ctx.agent.compaction
    c.threshold = option.max_tokens if isinstance(option, Compaction) else 0
    return request


def count_input(response: ModelResponse, rs: RunState, ctx: RunContext) -> ModelResponse:
    """postprocess's processor: the latest call's input tokens (cache included)."""
    usage = response.usage
    compactions(rs).size = usage.input_tokens + usage.cache_read_tokens + usage.cache_creation_tokens
    return response


def compacts(agent: Agent) -> bool:
    """Some agent of the tree has ``compaction=Compaction(...)``."""
    return any(a.compaction is not None and a.compaction.extension is COMPACTION for a in agent.walk())


COMPACTION = Extension(
    name=NAME,
    applies_to=compacts,
    states={COMPACT: compact},
    **detour(COMPACT, (not_repeating_calls, history_too_long, within_compaction_budget), "max_compactions"),
    budgets=[COMPACTIONS],
    guards={
        "history_too_long": history_too_long,
        "within_compaction_budget": within_compaction_budget,
        "not_repeating_calls": not_repeating_calls,
    },
    slice=Compactions,
    request=measure,
    response=count_input,
)
"""History compaction: the ``compact`` state and its rows, as one feature."""
