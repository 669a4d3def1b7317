"""Guardrails as states: input, parallel input, output and tool guards allow, rewrite or block; a block
ends the run "blocked"."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwright import (
    Agent,
    ConfigurationError,
    Limits,
    ModelRequest,
    ModelResponse,
    Runner,
    RunState,
    ScriptedModel,
    TextPart,
    ToolCall,
    tool,
)
from loopwright.features import (
    BUILT_IN_MACHINES,
    GUARDRAILS,
    LOOP_DETECTION,
    MULTI_AGENT,
    STRUCTURED_OUTPUT,
    WAITING,
    Block,
    Guardrail,
    Rewrite,
    machine_for,
)
from loopwright.machines.verify import verify
from loopwright.table.machine import compose
from loopwright.testing import assert_run_invariants

QUICK = Limits(retry_backoff_s=0)


def tool_call(x: int, i: int = 0) -> ToolCall:
    return ToolCall(id=f"c{x}-{i}", name="note", args={"x": x})


class World:
    """A tool that records what ran, and a model function that records its calls."""

    def __init__(self, replies: list[Any], delay: float = 0.0) -> None:
        self.ran: list[int] = []
        self.replies = list(replies)
        self.started = self.finished = self.cancelled = 0
        self.delay = delay

        @tool
        def note(x: int) -> str:
            """Note a number."""
            self.ran.append(x)
            return f"noted {x}"

        self.note = note

    async def model(self, request: ModelRequest) -> ModelResponse:
        self.started += 1
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.finished += 1
        reply = self.replies.pop(0)
        if isinstance(reply, str):
            return ModelResponse(parts=(TextPart(text=reply),), stop_reason="end_turn")
        return ModelResponse(parts=tuple(reply), stop_reason="tool_use")

    def agent(self, **options: Any) -> Agent:
        options.setdefault("limits", QUICK)
        return Agent(name="a", model=ScriptedModel(self.model), tools=[self.note], **options)  # type: ignore[arg-type]


def no_secrets(text: str, ctx: Any) -> Block | None:
    return Block("no secrets here") if "secret" in text else None


# ------------------------------------------------------------------ input


def test_a_blocking_input_guard_ends_the_run_before_any_model_call() -> None:
    world = World([[tool_call(1)], "done"])
    result = Runner(world.agent(input_guards=[no_secrets])).run_sync("tell me the secret")
    assert result.outcome == "blocked"
    assert (result.blocked.guard, result.blocked.where, result.blocked.message) == (  # type: ignore[union-attr]
        "no_secrets",
        "input",
        "no secrets here",
    )
    assert world.started == 0 and world.ran == [] and result.trace == ["start", "guard_input", "done"]
    assert result.output is None and any(e.type == "error_occurred" for e in result.events)


def test_an_input_guard_that_allows_costs_one_state_and_nothing_else() -> None:
    world = World(["hello"])
    result = Runner(world.agent(input_guards=[no_secrets])).run_sync("hi")
    assert result.outcome == "final" and result.output == "hello" and result.blocked is None
    assert result.trace[:3] == ["start", "guard_input", "preprocess"]


def test_an_input_rewrite_is_what_the_model_reads() -> None:
    seen: list[str] = []

    def model(request: ModelRequest) -> ModelResponse:
        seen.append(request.messages[-1].text)
        return ModelResponse(parts=(TextPart(text="ok"),))

    def redact(text: str, ctx: Any) -> Rewrite:
        return Rewrite(text.replace("1234", "****"))

    agent = Agent(name="a", model=ScriptedModel(model), input_guards=[redact])  # type: ignore[arg-type]
    result = Runner(agent).run_sync("my pin is 1234")
    assert seen == ["my pin is ****"] and result.messages[0].text == "my pin is ****"


def test_a_parallel_input_guard_cancels_the_first_model_call() -> None:
    world = World([[tool_call(1)], "done"], delay=5.0)

    async def slow_no(text: str, ctx: Any) -> Block:
        await asyncio.sleep(0.02)
        return Block("off topic")

    began = time.perf_counter()
    result = Runner(world.agent(input_guards=[Guardrail(slow_no, parallel=True)])).run_sync("hi")
    assert time.perf_counter() - began < 2.0
    assert result.outcome == "blocked" and result.blocked is not None and result.blocked.message == "off topic"
    assert (world.started, world.cancelled, world.finished, world.ran) == (1, 1, 0, [])
    assert result.trace == ["start", "guard_input", "preprocess", "guard_first", "done"]


def test_a_parallel_guard_that_allows_holds_the_tool_calls_until_it_has() -> None:
    world = World([[tool_call(1)], "done"])
    order: list[str] = []

    async def slow_yes(text: str, ctx: Any) -> None:
        await asyncio.sleep(0.05)
        order.append(f"guard (tools run so far: {len(world.ran)})")

    result = Runner(world.agent(input_guards=[Guardrail(slow_yes, parallel=True)])).run_sync("hi")
    assert result.outcome == "final" and world.ran == [1]
    assert order == ["guard (tools run so far: 0)"] and world.started == 2


def test_a_parallel_guard_may_not_rewrite() -> None:
    world = World(["done"])
    guard = Guardrail(lambda text, ctx: Rewrite("other"), name="rewriter", parallel=True)
    result = Runner(world.agent(input_guards=[guard])).run_sync("hi")
    assert result.outcome == "blocked" and "cannot rewrite" in result.blocked.message  # type: ignore[union-attr]


# ------------------------------------------------------------------ output


def no_bad(text: str, ctx: Any) -> Block | None:
    return Block("say nothing bad") if "bad" in text else None


def test_an_output_guard_block_ends_the_run_blocked() -> None:
    world = World(["a bad answer"])
    result = Runner(world.agent(output_guards=[no_bad])).run_sync("hi")
    assert result.outcome == "blocked" and result.output is None
    assert result.blocked is not None and (result.blocked.guard, result.blocked.where) == ("no_bad", "output")


def test_an_output_guard_with_retries_sends_its_message_back_to_the_model() -> None:
    world = World(["a bad answer", "a fine answer"])
    result = Runner(world.agent(output_guards=[Guardrail(no_bad, retries=2)])).run_sync("hi")
    assert result.outcome == "final" and result.output == "a fine answer" and result.blocked is None
    told = result.messages[2]
    assert told.role == "user" and "say nothing bad" in told.text and "'no_bad'" in told.text
    assert result.trace.count("guard_output") == 2


def test_an_output_rewrite_replaces_the_answer_and_the_history() -> None:
    world = World(["call me at 555-0100"])
    guard = Guardrail(lambda text, ctx: Rewrite(text.replace("555-0100", "[number]")), name="redact")
    result = Runner(world.agent(output_guards=[guard])).run_sync("hi")
    assert result.output == "call me at [number]" and result.messages[-1].text == "call me at [number]"


def test_a_salvaged_answer_passes_the_output_guards() -> None:
    once = Limits(max_iterations=1)
    result = Runner(World([[tool_call(1)], "bad salvage"]).agent(output_guards=[no_bad], limits=once)).run_sync("hi")
    assert result.outcome == "blocked" and result.trace[-3:] == ["salvage", "guard_salvaged", "done"]
    result = Runner(World([[tool_call(1)], "best effort"]).agent(output_guards=[no_bad], limits=once)).run_sync("hi")
    assert result.outcome == "salvaged" and result.output == "best effort"


# ------------------------------------------------------------------ tools


def no_13(call: ToolCall, ctx: Any) -> Block | None:
    return Block("13 is unlucky") if call.args.get("x") == 13 else None


def test_a_blocking_tool_guard_means_the_tool_did_not_run() -> None:
    world = World([[tool_call(13), tool_call(2)], "done"])
    result = Runner(world.agent(tool_guards=[no_13])).run_sync("hi")
    assert world.ran == [2] and result.outcome == "blocked"
    assert result.blocked is not None and (result.blocked.where, result.blocked.message) == ("tool", "13 is unlucky")
    answers = {p.call_id: p for p in result.messages[-1].parts}
    assert answers["c13-0"].is_error and "blocked by the guard 'no_13'" in str(answers["c13-0"].content)
    assert result.trace[-2:] == ["act", "done"]


def test_a_tool_guard_without_halt_lets_the_model_go_on() -> None:
    world = World([[tool_call(13)], "done"])
    result = Runner(world.agent(tool_guards=[Guardrail(no_13, halt=False)])).run_sync("hi")
    assert world.ran == [] and result.outcome == "final" and result.blocked is None


def test_tool_guards_rewrite_arguments_and_results() -> None:
    world = World([[tool_call(13)], "done"])
    fix = Guardrail(lambda call, ctx: Rewrite({"x": 7}), name="fix")
    hide = Guardrail(lambda res, ctx: Rewrite(f"[{res.content}]"), name="hide", after=True)
    result = Runner(world.agent(tool_guards=[fix, hide])).run_sync("hi")
    assert world.ran == [7] and result.messages[2].parts[0].content == "[noted 7]"  # type: ignore[union-attr]


def test_an_after_guard_withholds_a_result() -> None:
    world = World([[tool_call(3)], "done"])
    withhold = Guardrail(lambda res, ctx: Block("leaks"), name="withhold", after=True)
    result = Runner(world.agent(tool_guards=[withhold])).run_sync("hi")
    assert world.ran == [3] and result.outcome == "blocked"
    assert "noted" not in str(result.messages[2].parts[0].content)  # type: ignore[union-attr]


def test_a_guard_that_raises_or_answers_nonsense_blocks() -> None:
    def broken(text: str, ctx: Any) -> None:
        raise RuntimeError("oops")

    result = Runner(World(["x"]).agent(input_guards=[broken])).run_sync("hi")
    assert result.outcome == "blocked" and "raised RuntimeError: oops" in result.blocked.message  # type: ignore[union-attr]
    result = Runner(World(["x"]).agent(input_guards=[lambda text, ctx: 42])).run_sync("hi")
    assert "returned int" in result.blocked.message  # type: ignore[union-attr]
    result = Runner(World(["x"]).agent(input_guards=[lambda text, ctx: False])).run_sync("hi")
    assert result.outcome == "blocked" and "said no" in result.blocked.message  # type: ignore[union-attr]


def test_an_agent_as_a_guard_runs_nested_and_charges_the_parent() -> None:
    judge = Agent(name="judge", model=ScriptedModel(['{"allow": false, "message": "off topic"}']))
    world = World(["x"])
    result = Runner(world.agent(input_guards=[judge])).run_sync("hi")
    assert result.outcome == "blocked" and result.blocked is not None
    assert (result.blocked.guard, result.blocked.message) == ("judge", "off topic")
    assert world.started == 0 and result.usage.requests == 1  # the judge's call, charged to the guarded run
    fine = Agent(name="judge", model=ScriptedModel(['{"allow": true}']))
    assert Runner(World(["x"]).agent(input_guards=[fine])).run_sync("hi").outcome == "final"
    mute = Agent(name="judge", model=ScriptedModel(["not json at all"]), limits=Limits(max_parse_retries=0))
    result = Runner(World(["x"]).agent(input_guards=[mute])).run_sync("hi")
    assert result.outcome == "blocked" and "gave no verdict" in result.blocked.message  # type: ignore[union-attr]


# ------------------------------------------------------------------ configuration and the machine


def test_guard_options_in_the_wrong_place_are_refused() -> None:
    world = World(["x"])
    with pytest.raises(ConfigurationError, match="sets parallel, which only input guards take"):
        Runner(world.agent(output_guards=[Guardrail(no_bad, parallel=True)]))
    with pytest.raises(ConfigurationError, match="sets retries, which only output guards take"):
        Runner(world.agent(input_guards=[Guardrail(no_bad, retries=1)]))
    with pytest.raises(ConfigurationError, match="from 0 to 10"):
        Guardrail(no_bad, retries=11)
    with pytest.raises(ConfigurationError, match="input_guards takes functions"):
        world.agent(input_guards=["no"])
    with pytest.raises(ConfigurationError, match="must be a list of guards"):
        world.agent(input_guards=no_bad)


def test_agents_without_guards_run_on_machines_without_guard_states() -> None:
    world = World(["x"])
    assert GUARDRAILS not in machine_for(world.agent()).extensions
    assert not any(s.startswith("guard_") for s in machine_for(world.agent()).states)
    assert machine_for(world.agent(tool_guards=[no_13])).extensions[-1] is GUARDRAILS


@pytest.mark.parametrize(
    "features",
    [(GUARDRAILS,), (LOOP_DETECTION, GUARDRAILS), (STRUCTURED_OUTPUT, GUARDRAILS), (MULTI_AGENT, WAITING, GUARDRAILS)],
)
def test_machines_composed_with_guardrails_pass_verify(features: tuple[Any, ...]) -> None:
    report = verify(compose(*features))
    assert report.ok, str(report)
    assert BUILT_IN_MACHINES["guardrails"] is compose(GUARDRAILS)


def test_a_blocked_run_state_round_trips() -> None:
    result = Runner(World(["x"]).agent(input_guards=[no_secrets])).run_sync("secret")
    back = RunState.from_json(result.run_state.to_json())
    assert back.features["guardrails"].blocked == result.blocked and back.outcome == "blocked"


GUARDED_APP = """
from loopwright import Agent, ScriptedModel
from loopwright.features import Block

def no_secrets(text, ctx):
    return Block("no secrets") if "secret" in text else None

agent = Agent(name="clerk", model=ScriptedModel(["ok"]), input_guards=[no_secrets])
"""


@pytest.mark.slow
def test_the_cli_runs_a_guarded_agent_and_says_who_blocked_it(tmp_path: Path) -> None:
    (tmp_path / "guarded.py").write_text(GUARDED_APP)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "loopwright.cli", *args],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )

    ran = cli("run", "guarded:agent", "the secret")
    assert ran.returncode == 1, ran.stderr
    assert "blocked by the input guard 'no_secrets': no secrets" in ran.stdout
    checked = cli("check", "guarded:agent")
    assert checked.returncode == 0 and "no violations" in checked.stdout, checked.stdout + checked.stderr


# ------------------------------------------------------------------ properties

VERDICT = st.sampled_from(["allow", "block", "rewrite"])


def _guard(i: int, said: str, parallel: bool, log: list[str]) -> Guardrail:
    async def check(text: str, ctx: Any) -> Any:
        await asyncio.sleep(0)
        log.append(f"g{i}")
        return {"allow": None, "block": Block(f"g{i} says no"), "rewrite": Rewrite(text + "!")}[said]

    return Guardrail(check, name=f"g{i}", parallel=parallel)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    guards=st.lists(st.tuples(VERDICT, st.booleans()), min_size=1, max_size=4),
    calls=st.lists(st.integers(0, 5), min_size=1, max_size=3),
    delay=st.sampled_from([0.0, 0.01]),
)
def test_a_blocking_input_guard_means_no_model_call_and_no_tool_ran(
    guards: list[tuple[str, bool]], calls: list[int], delay: float
) -> None:
    world = World([[tool_call(x, i) for i, x in enumerate(calls)], "done"], delay=delay)
    log: list[str] = []
    found = [_guard(i, said, parallel, log) for i, (said, parallel) in enumerate(guards)]
    agent = world.agent(input_guards=found)
    result = Runner(agent).run_sync("hi")
    assert_run_invariants(result, agent)
    sequential = [said for said, parallel in guards if not parallel]
    parallel_says = [said for said, parallel in guards if parallel]
    blocked_before = "block" in sequential
    blocked_alongside = not blocked_before and any(s != "allow" for s in parallel_says)  # a rewrite in parallel blocks
    if blocked_before:
        assert result.outcome == "blocked" and world.started == 0 and world.ran == []
    elif blocked_alongside:
        assert result.outcome == "blocked" and world.ran == [] and world.started == 1
        assert world.finished + world.cancelled == 1  # the call was cancelled, or its reply dropped
    else:
        assert result.outcome == "final" and sorted(world.ran) == sorted(calls)
        assert result.messages[0].text == "hi" + "!" * sequential.count("rewrite")


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(st.integers(0, 5), min_size=1, max_size=4),
    unlucky=st.sets(st.integers(0, 5)),
    halt=st.booleans(),
    after=st.booleans(),
)
def test_a_blocking_tool_guard_means_that_tool_did_not_run(
    calls: list[int], unlucky: set[int], halt: bool, after: bool
) -> None:
    world = World([[tool_call(x, i) for i, x in enumerate(calls)], "done"])

    def refuse(value: Any, ctx: Any) -> Block | None:
        x = value.args["x"] if isinstance(value, ToolCall) else int(str(value.content).split()[-1])
        return Block("unlucky") if x in unlucky else None

    agent = world.agent(tool_guards=[Guardrail(refuse, halt=halt, after=after)])
    result = Runner(agent).run_sync("hi")
    assert_run_invariants(result, agent)
    refused = [x for x in calls if x in unlucky]
    if after:
        assert sorted(world.ran) == sorted(calls)  # it ran; its result was withheld
    else:
        assert sorted(world.ran) == sorted(x for x in calls if x not in unlucky)
    answers = [p for p in result.messages[2].parts]
    assert sum("blocked by the guard" in str(p.content) for p in answers) == len(refused)  # type: ignore[union-attr]
    assert result.outcome == ("blocked" if refused and halt else "final")


@settings(max_examples=40, deadline=None)
@given(retries=st.integers(0, 3), good_at=st.integers(0, 6))
def test_output_guard_retries_are_bounded(retries: int, good_at: int) -> None:
    replies = ["bad" if i != good_at else "good" for i in range(retries + 1)]
    world = World(replies)
    agent = world.agent(output_guards=[Guardrail(no_bad, retries=retries)])
    result = Runner(agent).run_sync("hi")
    assert_run_invariants(result, agent)
    if good_at <= retries:
        assert result.outcome == "final" and world.started == good_at + 1
    else:
        assert result.outcome == "blocked" and world.started == retries + 1
    assert result.run_state.charges.get("max_guard_retries", 0) == min(good_at, retries)


def test_tool_guards_run_before_a_confirmation_is_asked() -> None:
    from loopwright import approve

    paid: list[int] = []

    @tool(requires_confirmation=True)
    def pay(amount: int) -> str:
        """Pay an amount (asks a person first)."""
        paid.append(amount)
        return f"paid {amount}"

    def at_most_100(call: ToolCall, ctx: Any) -> Block | None:
        return Block("over the limit") if call.args["amount"] > 100 else None

    def agent(amount: int) -> Agent:
        model = ScriptedModel([[ToolCall(name="pay", args={"amount": amount})], "done"])
        return Agent(name="a", model=model, tools=[pay], tool_guards=[at_most_100])

    blocked = Runner(agent(500)).run_sync("pay")
    assert blocked.outcome == "blocked" and blocked.pending == [] and paid == []
    runner = Runner(agent(50))
    first = runner.run_sync("pay")
    assert first.outcome == "suspended" and paid == []
    done = runner.resume_sync(first, {first.pending[0].call_id: approve()})
    assert done.outcome == "final" and paid == [50]
