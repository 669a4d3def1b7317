"""A hypothesis state machine that steps runs of an agent with interleaved rules — advance,
cancel, inject a tool failure — and checks the invariants after every step."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from ..data.errors import ToolError
from ..data.events import ToolCall
from ..features import machine_for
from ..loop.runner import Run, Runner
from ..runtime.agent import Agent
from ..runtime.context import RunContext
from ..table.machine import LoopMachine
from .invariants import assert_run_invariants, check_partial, scripted
from .strategies import ScriptItem, model_behaviours

_MAX_STEPS = 10_000


class _AgentRunMachine(RuleBasedStateMachine):
    """Steps one run of ``agent`` per example; :func:`agent_state_machine` makes a subclass
    with ``agent``, ``behaviour`` and ``machine`` set."""

    agent: ClassVar[Agent]
    behaviour: ClassVar[dict[str, Any]]
    machine: ClassVar[LoopMachine]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.fail_next_tool = False
        self.script: list[ScriptItem] = []
        self.run: Run | None = None
        self.runner: Runner | None = None
        self.scripted: Agent | None = None

    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        self.script = data.draw(model_behaviours(self.agent, **self.behaviour), label="script")
        # every agent of the tree can be hit
        self.scripted = scripted(self.agent, self.script, lambda a: {"before_tool": self._failing(a.before_tool)})
        self.runner = Runner(self.scripted)
        self.run = self.runner.start("a message from hypothesis")

    def _failing(self, users_before: Any) -> Any:
        def before_tool(call: ToolCall, ctx: RunContext) -> Any:
            if self.fail_next_tool:
                self.fail_next_tool = False
                raise ToolError("failure injected by the test")
            return users_before(call, ctx) if users_before is not None else None

        return before_tool

    @rule()
    def advance(self) -> None:
        assert self.run is not None
        if not self.run.done:
            self.loop.run_until_complete(self.run.step())

    @rule()
    def cancel(self) -> None:
        assert self.runner is not None and self.run is not None
        self.runner.cancel(self.run.run_id)

    @rule()
    def inject_tool_failure(self) -> None:
        self.fail_next_tool = True

    @invariant()
    def invariants_hold(self) -> None:
        if self.run is not None:
            check_partial(self.run.state.trace, self.run.events, self.machine, self.script)

    def teardown(self) -> None:
        try:
            if self.run is not None:
                for _ in range(_MAX_STEPS):
                    if self.run.done:
                        break
                    self.loop.run_until_complete(self.run.step())
                assert_run_invariants(self.run.result, self.scripted, script=self.script)
        finally:
            self.loop.close()


def agent_state_machine(agent: Agent, **behaviour: Any) -> type[RuleBasedStateMachine]:
    """A ``RuleBasedStateMachine`` class for ``agent``; run it in pytest with
    ``TestMyAgent = agent_state_machine(my_agent).TestCase``. ``behaviour`` options go to
    :func:`model_behaviours` (e.g. ``max_replies=4, model_error=0.2``)."""
    attributes = {"agent": agent, "behaviour": behaviour, "machine": machine_for(agent)}
    return type(f"{agent.name}_RunMachine", (_AgentRunMachine,), attributes)
