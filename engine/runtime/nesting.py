"""Runs nested in tools: a run started while a tool of another run is executing is that run's
child.

A child charges every run above it as it goes, not when it ends, so runs that go on at once
(a reply's calls, each starting a run) share the room left rather than each seeing all of it:

- ``max_iterations``: each model pass of a child is taken from the room of every run above it
  before the pass is made. A child takes its first pass when it starts (it is refused, with a
  :class:`ConfigurationError` the calling tool's result reports, when a run above has none
  left) and each next pass during the pass before it (:meth:`Up.refuses`); when none is
  left, its own ``max_iterations`` is lowered to the passes it made, so its table stops it
  there (salvage, or outcome ``"limit"``), naming ``max_iterations``. A pass taken but not
  made is given back when the child ends (or suspends, or is paused). So the passes of the
  whole tree are at most the root's ``max_iterations``; salvage calls are not passes (one per run at most), and a
  child whose pass is the last the runs above have makes none (its salvage is turned off: no model call is made
  once a run above has spent ``max_iterations``; it ends ``"limit"``, and a workflow above it ends ``"limit"``
  naming the budget).
- ``max_total_tokens``: a child's tokens are added to every run above it before each of its
  model calls, and the call is refused (the run salvages, naming ``max_total_tokens``) when a
  run above has spent its budget.
- ``max_tool_calls``: a child's calls past the least room of the runs above it are answered
  "not run", and the calls it runs are charged to them at once.
- ``max_cost_usd``: as tokens: a child's cost (``Usage.cost_usd``) is added to every run above
  it before each of its model calls, and the call is refused (``reason -> done
  [request_over_cost_budget]``, outcome ``"limit"``, naming ``max_cost_usd``) when a run above
  has no room for its estimated cost (its input at the least, or the last step's cost); a cost
  that is unknown (a model without a price) stays unknown up the tree and, as for a lone run,
  spends any cost budget. Calls in flight at once reserve their estimate on the runs above
  (:class:`CostUp`, which states the bound). Only children of runs with a ``max_cost_usd`` check
  it: others pay nothing for it.

Each spend reaches each run above once: what a child sends its parent also went to every run
above the parent, so it counts as sent by the parent too (a run two levels down is not counted
twice by the root). A child that suspends (waits for a person) or is paused sends what it spent
and drops its link then; resumed in a tool of a run (a workflow resuming its child), it is that
run's child again (:func:`rejoin`), with what it has spent plus the room left above as its caps.

It starts with that room as its own caps (where smaller than its agent's; its agent's limits
as they are otherwise) and ends by the parent's deadline at the latest. Runs nest at most
``Limits.max_depth`` deep (the root's).

The link is a context variable set while a run's tools run (:func:`enter_tools`), so it reaches
runs started in a tool's own task, in tasks it creates, and in a sync tool's thread.

A nested run resumed rejoins the runs above. Resumed while a tool of another run is running (a
workflow resuming its child after a confirmation, or after a crash with a store), it is that
run's child again: :func:`rejoin` (``Run.run_to_end`` of every resume) links it at the next
depth, with what it has spent plus the room left above as its caps (``max_iterations``,
``max_tool_calls``, ``max_total_tokens``, ``max_cost_usd``, where lower than its own) and the
parent's deadline. It never raises: with no room left its caps are what it has spent, so its
table stops it at its next decide. What it sends up from there depends on what the runs above
already hold of it (:class:`Had`): all of it, sent when it stopped, unless the caller says
otherwise with :data:`had` (a workflow resumed from its own checkpoint after a crash:
``engine/workflows/children.py``); a child that ended before such a crash is read back with
:func:`absorb`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar, Token
from decimal import Decimal
from typing import Any, NamedTuple

from ..data.build import trusted
from ..data.errors import ConfigurationError
from ..data.events import ZERO_USAGE, ErrorInfo, ErrorOccurred, Usage
from ..data.run_state import RunState

_charging = threading.Lock()


class Parent(NamedTuple):
    """The run whose tool is running, and how deep it is (a top-level run is 0)."""

    state: RunState
    depth: int


class Up:
    """A child run's link to the runs above it (``RunContext.up``): what it has charged them."""

    __slots__ = ("above", "child", "depth", "held", "links", "sent_calls", "sent_usage")

    def __init__(self, child: RunState, above: tuple[RunState, ...], depth: int, links: tuple[Up, ...] = ()) -> None:
        self.child = child
        """The child run (kept: its ``id`` is the key of this link while the run goes on)."""
        self.above = above
        """The runs above, its parent first, the root last."""
        self.links = links
        """The links of the runs above that are children themselves (all but the root), in the
        same order: what this run sends them also went to every run above them, so it counts
        as sent by them (each spend reaches each run once)."""
        self.depth = depth
        self.held = 0
        """Passes taken from the runs above and not made yet (0 or 1)."""
        self.sent_calls = 0
        self.sent_usage: Usage = ZERO_USAGE
        """The tool calls and tokens of this run already added to the runs above (its own, and
        those its nested runs added to them)."""

    def passes_left(self) -> int:
        """The least room left in ``max_iterations`` of the runs above."""
        least = None
        for up in self.above:
            left = up.limits.max_iterations - up.iteration
            if least is None or left < least:
                least = left
        return least  # type: ignore[return-value]  # (above is never empty)

    def take_pass(self) -> bool:
        """Take one pass from every run above, if each has one left."""
        with _charging:
            for up in self.above:
                if up.iteration >= up.limits.max_iterations:
                    return False
            for up in self.above:
                up.iteration += 1
            self.held += 1
            return True

    def send(self, rs: RunState) -> None:
        """Add the tool calls and tokens the child ``rs`` spent since last time to the runs above."""
        with _charging:
            usage, sent, calls = rs.usage, self.sent_usage, rs.tool_calls_made - self.sent_calls
            spent = None if usage is sent or usage.__dict__ == sent.__dict__ else _minus(usage, sent)
            if spent is None and not calls:  # (a reply that reports no usage: a new zero, nothing to add)
                return
            for up in self.above:
                up.tool_calls_made += calls
                if spent is not None:
                    up.usage = up.usage + spent
            for link in self.links:  # (the runs above them have it already: not sent again)
                link.sent_calls += calls
                if spent is not None:
                    link.sent_usage = link.sent_usage + spent
            self.sent_calls, self.sent_usage = rs.tool_calls_made, usage

    def refuses(self, rs: RunState, ctx: Any, last: Any = None) -> bool:  # noqa: C901 (before every model call of a nested run: written out)
        """Before each model call of the child ``rs`` (in ``reason``; ``rs.attempt`` is 1 for a
        pass's first call, which ``rs.iteration`` already counts): True when the runs above
        have no room for it (``rs.model_error`` and an ``error`` event say why). A pass uses
        the pass taken for it and takes the next one, or lowers the child's own
        ``max_iterations`` to the passes it made when the runs above have none left.
        (It runs before every model call of a nested run: the usual case is written out.)"""
        if rs.usage is not self.sent_usage or rs.tool_calls_made != self.sent_calls:
            self.send(rs)
        for up in self.above:
            cap = up.limits.max_total_tokens
            if cap is not None and up.usage.total_tokens >= cap:
                return _refuse(rs, ctx, ErrorInfo(  # (the table's token-budget rows: salvage, naming it)
                    kind="token_budget",
                    message=f"run {up.run_id!r} above this run has spent its max_total_tokens={cap} "
                    f"({up.usage.total_tokens} tokens, with its nested runs); the model call was not made",
                ))  # fmt: skip
        if rs.attempt != 1:
            return False
        if self.held:
            self.held -= 1
        elif not self.take_pass():  # (only when the table came round without the iteration guard)
            return _refuse(rs, ctx, ErrorInfo(
                kind="model",
                message=f"the runs above run {rs.run_id!r} have spent their max_iterations with their nested "
                f"runs (the root's: {self.above[-1].limits.max_iterations}); the model call was not made",
            ))  # fmt: skip
        if rs.iteration < rs.limits.max_iterations:  # the next pass, taken now (take_pass, written out)
            with _charging:
                for up in self.above:
                    if up.iteration >= up.limits.max_iterations:
                        break
                else:
                    for up in self.above:
                        up.iteration += 1
                    self.held += 1
                    return False
            rs.limits = rs.limits.model_copy(update={"max_iterations": rs.iteration})
            _no_salvage(rs)
        elif self.passes_left() <= 0:  # its last pass is the runs above's last: no call after it
            _no_salvage(rs)
        return False

    def run_calls(self, room: tuple[int, int] | None, wanted: int) -> tuple[int, int] | None:
        """``act`` of the child is about to run up to ``wanted`` tool calls with ``room`` left
        of its own: the least room of it and the runs above (with the cap that says so); the
        calls that fit are charged to the runs above now."""
        with _charging:
            above = self.tool_call_room()
            if above is not None and (room is None or above[0] < room[0]):
                room = above
            runs = wanted if room is None else min(wanted, max(room[0], 0))
            for up in self.above:
                up.tool_calls_made += runs
            for link in self.links:
                link.sent_calls += runs
            self.sent_calls += runs
        return room

    def tool_call_room(self) -> tuple[int, int] | None:
        """The least room left in ``max_tool_calls`` of the runs above, and that run's cap
        (None: none has a cap)."""
        least: tuple[int, int] | None = None
        for up in self.above:
            cap = up.limits.max_tool_calls
            if cap is not None and (least is None or (cap - up.tool_calls_made, cap) < least):
                least = (cap - up.tool_calls_made, cap)
        return least

    def token_room(self) -> int | None:
        """The least room left in ``max_total_tokens`` of the runs above (None: none has a cap)."""
        least: int | None = None
        for up in self.above:
            cap = up.limits.max_total_tokens
            if cap is not None and (least is None or cap - up.usage.total_tokens < least):
                least = cap - up.usage.total_tokens
        return least

    def end(self, rs: RunState) -> None:
        """The child ``rs`` has ended: its last tool calls and tokens go up, an unmade pass back."""
        self.send(rs)
        if self.held:
            with _charging:
                for up in self.above:
                    up.iteration -= self.held
            self.held = 0


def _no_salvage(rs: RunState) -> None:
    """The runs above have spent their ``max_iterations`` with this pass of the child ``rs``: no
    model call may follow it, salvage's included (the child ends ``"limit"``, and so do they)."""
    if rs.limits.salvage:
        rs.limits = rs.limits.model_copy(update={"salvage": False})
    own = rs.turn_limits
    if own is not None and own.salvage:
        rs.turn_limits = own.model_copy(update={"salvage": False})


class CostUp(Up):
    """The link of a child with a run above it that has a ``max_cost_usd``: its model calls
    also check that budget (a child of runs without one is a plain :class:`Up`).

    Each call **reserves** its estimated cost on every run above with a cap before it is sent,
    so calls in flight at once (parallel branches, a reply's agent tools) see each other: a call
    is made only when the spent cost, plus what the calls in flight below that run have reserved,
    plus its own estimate fits the cap. The reservation stands until the child's next model call
    or its end (it suspends, is paused, fails or is cancelled: :meth:`end`), when it is released
    and its real cost, sent up, takes its place. A call whose cost cannot be estimated (the first
    call of a model without a price, with no call below that run seen yet) is made alone: it
    reserves all the room left, and is refused while any other call below the capped run is in
    flight. So, when each model's calls cost no more than the estimate (its last call's cost, the
    largest call seen above for a first call, at least its input at its price), the tree spends
    at most its cap; a call dearer than its estimate overshoots by what it costs over it, and
    the unknown first call, made alone, by what it costs over the room left (nothing is called
    after it)."""

    __slots__ = ("reserved",)

    def __init__(self, child: RunState, above: tuple[RunState, ...], depth: int, links: tuple[Up, ...] = ()) -> None:
        super().__init__(child, above, depth, links)
        self.reserved: Decimal | None = None
        """What this child's call in flight has reserved on each capped run above (None: no call)."""

    def refuses(self, rs: RunState, ctx: Any, last: Any = None) -> bool:
        self.release(last)
        if rs.usage is not self.sent_usage or rs.tool_calls_made != self.sent_calls:
            self.send(rs)
        own = self.estimate(rs, ctx, last)
        with _charging:
            estimate = own if own is not None else _largest_seen(self.above)
            for up in self.above:
                cap = up.limits.max_cost_usd
                if cap is None:
                    continue
                spent, room = cost_spent(up.usage), _ROOMS.get(id(up))
                held = room.reserved if room is not None else Decimal(0)
                if spent < cap and (
                    (estimate is not None and spent + held + estimate <= Decimal(str(cap)))
                    or (estimate is None and (room is None or not room.calls))  # unknown: made alone
                ):
                    continue
                return _refuse(rs, ctx, ErrorInfo(  # (the table's cost-budget row: done, naming it)
                    kind="cost_budget", message=_over(up, cap, spent, held, estimate, room),
                ))  # fmt: skip
            self.reserve(estimate)
        if Up.refuses(self, rs, ctx, last):
            self.release(None)
            return True
        return False

    def reserve(self, estimate: Decimal | None) -> None:
        """Reserve ``estimate`` (None: all the room left) on every capped run above (under the lock)."""
        amount = estimate
        if amount is None:
            amount = Decimal(0)
            for up in self.above:
                cap = up.limits.max_cost_usd
                if cap is not None:
                    amount = max(amount, Decimal(str(cap)) - cost_spent(up.usage))
        for up in self.above:
            if up.limits.max_cost_usd is not None:
                room = _ROOMS.get(id(up))
                if room is None:
                    room = _ROOMS[id(up)] = _Room(up)
                room.reserved += amount
                room.calls += 1
                room.alone = room.alone or estimate is None
        self.reserved = amount

    def release(self, last: Any) -> None:
        """The call in flight (if any) is over: its reservation is released on every run above
        (its real cost goes up with the child's usage); ``last`` is its reply, whose cost the
        runs above keep as the largest call seen (a first call's estimate of a model without a price)."""
        amount = self.reserved
        if amount is None:
            return
        cost = last.usage.cost_usd if last is not None else None
        with _charging:
            self.reserved = None
            for up in self.above:
                room = _ROOMS.get(id(up))
                if room is None:
                    continue
                room.reserved -= amount
                room.calls -= 1
                room.alone = False
                if cost is not None and (room.largest is None or cost > room.largest):
                    room.largest = cost

    def end(self, rs: RunState) -> None:
        self.release(rs.response)
        Up.end(self, rs)

    @staticmethod
    def estimate(rs: RunState, ctx: Any, last: Any) -> Decimal | None:
        """What the child's next call will cost (as :func:`~loopwright.runtime.model_choice.call_estimate`:
        its input at the least, or ``last`` reply's cost, the larger); None: unknown (a model
        without a price, before its first reply)."""
        from ..models.prices import least_input_cost  # (no import of model_choice: it imports the context)

        agent = ctx.agent
        model = agent.models[rs.fallbacks.get(agent.name, 0)] if rs.fallbacks else agent.model
        name = next((v for a in ("model", "name") if isinstance(v := getattr(model, a, None), str) and v), None)
        least = least_input_cost(name, rs.request) if rs.request is not None else None
        cost = last.usage.cost_usd if last is not None else None
        if least is None and cost is None:
            return None
        return max(least or Decimal(0), cost or Decimal(0))

    def cost_room(self, held: bool = True) -> Decimal | None:
        """The least room left in ``max_cost_usd`` of the runs above, less what calls in flight
        have reserved there (not with ``held=False``: a child's own cap as it starts or rejoins,
        which its calls' reservations then keep within the room); None: none has one."""
        least: Decimal | None = None
        for up in self.above:
            cap = up.limits.max_cost_usd
            if cap is not None:
                spent = cost_spent(up.usage)
                room = _ROOMS.get(id(up)) if held else None
                left = Decimal(0) if spent == _UNKNOWN else Decimal(str(cap)) - spent
                if room is not None:
                    left -= room.reserved
                if least is None or left < least:
                    least = left
        return least


class _Room:
    """The calls in flight below the run ``run`` with a ``max_cost_usd``, and the dearest call
    seen below it. It holds ``run``: while the entry lives (by its ``id``) no other run can take
    that ``id`` — a run that dies without ending (a stage raised what the loop passes on) leaves
    its entry to itself, never to a run made later."""

    __slots__ = ("alone", "calls", "largest", "reserved", "run")

    def __init__(self, run: RunState) -> None:
        self.run = run
        self.reserved = Decimal(0)
        self.calls = 0
        self.alone = False
        self.largest: Decimal | None = None


_ROOMS: dict[int, _Room] = {}
"""By ``id`` of a run with a ``max_cost_usd``: what the calls in flight below it have reserved,
and the dearest call seen below it (dropped when that run ends, suspends or is paused: :func:`charge`)."""


def _largest_seen(above: tuple[RunState, ...]) -> Decimal | None:
    """The dearest call seen below the runs ``above`` (None: none yet)."""
    found: Decimal | None = None
    for up in above:
        room = _ROOMS.get(id(up))
        if room is not None and room.largest is not None and (found is None or room.largest > found):
            found = room.largest
    return found


def _over(up: RunState, cap: float, spent: Decimal, held: Decimal, estimate: Decimal | None, room: _Room | None) -> str:
    shown = "an unknown amount: a model without a price" if spent == _UNKNOWN else f"${spent}"
    if spent >= cap:
        more = ""
    elif estimate is None:
        more = (
            " and this call's cost cannot be estimated (a model without a price, before its first reply), so it is "
            "made only when no other call below that run is in flight; give the model a price "
            "(loopwright.models.register_price)"
        )
    else:
        more = f" and this call would cost about ${estimate}"
        if held:
            more += f" with ${held} reserved by calls in flight"
            if room is not None and room.alone:
                more += " (one of them of unknown cost, made alone)"
    return (
        f"run {up.run_id!r} above this run has spent {shown} of its max_cost_usd={cap:g} (with its nested runs)"
        f"{more}; the model call was not made"
    )


_UNKNOWN = Decimal("Infinity")


def cost_spent(usage: Usage) -> Decimal:
    """What ``usage`` cost, for a cost budget: unknown (a model without a price) counts as
    infinite (it spends any budget, as for a lone run), nothing spent as 0."""
    cost = usage.cost_usd
    if cost is None:
        return Decimal(0) if usage.total_tokens == 0 and usage.requests == 0 else _UNKNOWN
    return cost


def tree_spent(rs: RunState) -> str | None:
    """The budget the run ``rs`` (a workflow, whose children charge it) or a run above it has
    spent, by name (None: room in all): ``max_iterations``, ``max_tool_calls``,
    ``max_total_tokens`` or ``max_cost_usd``."""
    up = _UPS.get(id(rs))
    for run in (rs, *(up.above if up is not None else ())):
        limits = run.limits
        if run.iteration >= limits.max_iterations:
            return "max_iterations"
        if limits.max_tool_calls is not None and run.tool_calls_made >= limits.max_tool_calls:
            return "max_tool_calls"
        if limits.max_total_tokens is not None and run.usage.total_tokens >= limits.max_total_tokens:
            return "max_total_tokens"
        if limits.max_cost_usd is not None and cost_spent(run.usage) >= Decimal(str(limits.max_cost_usd)):
            return "max_cost_usd"
    return None


def _refuse(rs: RunState, ctx: Any, why: ErrorInfo) -> bool:
    rs.model_error = why
    ctx.emit(ErrorOccurred, error=why)
    return True


def _minus(a: Usage, b: Usage) -> Usage:
    if b is ZERO_USAGE:
        return a
    return trusted(
        Usage,
        input_tokens=max(a.input_tokens - b.input_tokens, 0),
        output_tokens=max(a.output_tokens - b.output_tokens, 0),
        cache_read_tokens=max(a.cache_read_tokens - b.cache_read_tokens, 0),
        cache_creation_tokens=max(a.cache_creation_tokens - b.cache_creation_tokens, 0),
        requests=max(a.requests - b.requests, 0),
        cost_usd=None if a.cost_usd is None or b.cost_usd is None else a.cost_usd - b.cost_usd,
        cache_creation_1h_tokens=max(a.cache_creation_1h_tokens - b.cache_creation_1h_tokens, 0),
        server_tool_uses=max(a.server_tool_uses - b.server_tool_uses, 0),
    )


_PARENT: ContextVar[Parent | None] = ContextVar("loopwright_parent_run", default=None)
_UPS: dict[int, Up] = {}
"""The link of each child run in progress (by ``id`` of its RunState; top-level runs are not here)."""


def link(rs: RunState) -> Parent:
    """What runs started in the tools of the run ``rs`` see as their parent (the same for the
    whole run: its context keeps it)."""
    up = _UPS.get(id(rs))
    return Parent(rs, 0 if up is None else up.depth)


enter_tools: Callable[[Parent], Token[Parent | None]] = _PARENT.set
"""``enter_tools(link(rs))``: tools of the run ``rs`` are about to run; runs started from them
are its children (until ``leave_tools(token)``). The context variable's own methods: no frame."""
leave_tools: Callable[[Token[Parent | None]], None] = _PARENT.reset


def parent() -> Parent | None:
    return _PARENT.get()


def up_of(rs: RunState) -> Up | None:
    """The link of the run ``rs`` to the runs above it (None: a top-level run)."""
    return _UPS.get(id(rs))


def adopt(rs: RunState, up: Parent) -> None:
    """Make the new run ``rs`` a child of ``up``: check the depth, take its first pass from the
    runs above, cap its budgets by their room, bound it by the parent's deadline."""
    top = up.state.limits
    depth = up.depth + 1
    if depth > top.max_depth:
        raise ConfigurationError(
            f"run {rs.run_id!r} would nest {depth} deep in tools of run {up.state.run_id!r}, past its "
            f"max_depth={top.max_depth}; answer without starting another run (or raise Limits.max_depth)"
        )
    link_ = _link(rs, up.state, depth)
    iterations = link_.passes_left()
    if not link_.take_pass():
        raise ConfigurationError(
            f"run {up.state.run_id!r} has spent its max_iterations={top.max_iterations} (with the runs nested "
            "in its tools); a run started in its tool would have no model calls left"
        )
    own = rs.limits
    room: dict[str, Any] = {}  # (only what the runs above lower: usually nothing, and no copy)
    if iterations < own.max_iterations:
        room["max_iterations"] = iterations
    tool_calls = room_[0] if (room_ := link_.tool_call_room()) is not None else None
    for name, left in (("max_tool_calls", tool_calls), ("max_total_tokens", link_.token_room())):
        if left is None:
            continue
        if left <= 0:
            link_.end(rs)
            raise ConfigurationError(
                f"run {up.state.run_id!r} has spent its {name}={getattr(top, name)} (with the runs nested in "
                "its tools); no run can start in its tool"
            )
        mine = getattr(own, name)
        if mine is None or left < mine:
            room[name] = left
    if type(link_) is CostUp:
        _cost_cap(rs, link_, up.state, room)
    if room:
        rs.limits = own.model_copy(update=room)
    _by_deadline(rs, up.state)
    _UPS[id(rs)] = link_


def _by_deadline(rs: RunState, parent: RunState) -> None:
    """The child ``rs`` ends by its parent's deadline at the latest."""
    if parent.deadline is not None and (rs.deadline is None or parent.deadline < rs.deadline):
        rs.deadline = parent.deadline


def _cost_cap(rs: RunState, link_: CostUp, parent: RunState, room: dict[str, Any]) -> None:
    """A new child's ``max_cost_usd``: the least room left above, where smaller than its own
    (into ``room``); none left: it does not start."""
    cost = link_.cost_room(held=False)
    if cost is None:
        return
    if cost <= 0:
        link_.end(rs)
        raise ConfigurationError(
            f"run {parent.run_id!r} (or a run above it) has spent its max_cost_usd (with the runs nested in its "
            "tools); no run can start in its tool"
        )
    own = rs.limits.max_cost_usd
    if own is None or cost < Decimal(str(own)):
        room["max_cost_usd"] = float(cost)


def _link(rs: RunState, parent: RunState, depth: int) -> Up:
    above = _UPS.get(id(parent))
    kind = CostUp if parent.limits.max_cost_usd is not None or type(above) is CostUp else Up
    if above is None:  # the parent is a top-level run
        return kind(rs, (parent,), depth)
    return kind(rs, (parent, *above.above), depth, (above, *above.links))


def give_back(rs: RunState) -> None:
    """The pass the run ``rs`` is in makes no model call (a workflow a transfer made its active
    agent answers in the model's place, and its own run's passes are charged to ``rs``): it goes
    back to ``rs`` and the runs above it, so ``rs.iteration`` counts the model passes made."""
    with _charging:
        rs.iteration -= 1
        up = _UPS.get(id(rs))
        for above in up.above if up is not None else ():
            above.iteration -= 1


def charge(rs: RunState) -> None:
    """The child run ``rs`` has ended: the rest of what it spent goes to the runs above."""
    up = _UPS.pop(id(rs), None)
    if up is not None:
        up.end(rs)
    if _ROOMS:  # (a run with a max_cost_usd whose children called models: what it kept of them goes)
        _ROOMS.pop(id(rs), None)


# ------------------------------------------------------------------ a nested run resumed rejoins the runs above


class Had(NamedTuple):
    """What the runs above hold of a child's spend when it is resumed: its tool calls, usage and
    passes (a workflow resumed from its own checkpoint holds none of what its child spent after it)."""

    calls: int
    usage: Usage
    passes: int


NOTHING = Had(0, ZERO_USAGE, 0)
_HAD: ContextVar[Had | None] = ContextVar("loopwright_resumed_child_had", default=None)
had: Callable[[Had | None], Token[Had | None]] = _HAD.set
"""``token = had(NOTHING)`` around a resume of a child whose worker died: the runs above hold
none of its spend (else: all of it, sent when it suspended or was paused); ``_HAD.reset(token)``."""
had_reset: Callable[[Token[Had | None]], None] = _HAD.reset


def rejoin(rs: RunState) -> Up | None:
    """The run ``rs`` is resumed: started again inside a tool of another run (a workflow
    resuming its child), it is that run's child again, with the room left above (over what it
    has spent) as its caps and the parent's deadline; its link (None: a top-level run)."""
    up = _PARENT.get()
    found = _UPS.get(id(rs))
    if up is None or found is not None:
        return found
    link_ = _link(rs, up.state, up.depth + 1)
    _take_over(rs, link_, _HAD.get())
    own = rs.limits
    room = _room_over(rs, link_)
    if room:
        rs.limits = own.model_copy(update=room)
    _by_deadline(rs, up.state)
    _UPS[id(rs)] = link_
    return link_


def _take_over(rs: RunState, link_: Up, had: Had | None) -> None:
    """What the runs above hold of the resumed child ``rs``: all it spent (None: it suspended or
    was paused, and sent it then), or ``had`` (the rest, and its passes, go up now)."""
    if had is None:
        link_.sent_calls, link_.sent_usage = rs.tool_calls_made, rs.usage
        return
    link_.sent_calls, link_.sent_usage = had.calls, had.usage
    with _charging:
        for above in link_.above:
            above.iteration += max(rs.iteration - had.passes, 0)
    link_.send(rs)


def _room_over(rs: RunState, link_: Up) -> dict[str, Any]:
    """The resumed child's caps the room left above lowers: what it has spent plus that room."""
    own = rs.limits
    room: dict[str, Any] = {}
    passes = rs.iteration + max(link_.passes_left(), 0)
    if passes < own.max_iterations:
        room["max_iterations"] = passes
    calls = link_.tool_call_room()
    if calls is not None and (own.max_tool_calls is None or rs.tool_calls_made + max(calls[0], 0) < own.max_tool_calls):
        room["max_tool_calls"] = rs.tool_calls_made + max(calls[0], 0)
    tokens, spent = link_.token_room(), rs.usage.total_tokens
    if tokens is not None and (own.max_total_tokens is None or spent + max(tokens, 0) < own.max_total_tokens):
        room["max_total_tokens"] = spent + max(tokens, 0)
    cost = link_.cost_room(held=False) if isinstance(link_, CostUp) else None
    if cost is not None and rs.usage.cost_usd is not None:
        mine = rs.usage.cost_usd + max(cost, Decimal(0))
        if own.max_cost_usd is None or mine < Decimal(str(own.max_cost_usd)):
            room["max_cost_usd"] = float(mine)
    return room


def absorb(parent: RunState, child: RunState) -> None:
    """The child ``child`` of the run ``parent`` ended before the worker running them died; the
    parent, resumed from its own checkpoint, reads it back and takes its spend (its tool calls,
    usage and passes) with the runs above."""
    link_ = _link(child, parent, 0)
    with _charging:
        for above in link_.above:
            above.iteration += child.iteration
    link_.send(child)
