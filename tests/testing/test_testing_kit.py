"""The testing kit itself: strategies produce valid scripts, invariants catch broken runs and
say why, hypothesis finds and shrinks a seeded bug, and the coverage report is exact."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import HealthCheck, find, given, settings

from loopwright import Agent, ModelResponse, Runner, ScriptedModel, ToolCall, ToolResult, tool
from loopwright.data.result import RunResult
from loopwright.testing import (
    InvariantViolation,
    assert_run_invariants,
    describe_script,
    from_schema,
    limits,
    model_behaviours,
)


@tool
def lookup(city: str, nights: int, express: bool = False) -> str:
    """Look up a price."""
    return f"{city}:{nights}"


@tool
def remember(note: str) -> str:
    """Remember a note."""
    return "ok"


AGENT = Agent(name="kit", model=ScriptedModel([]), tools=[lookup, remember])


@settings(max_examples=60, deadline=None)
@given(args=from_schema(lookup.spec.input_schema))
def test_generated_arguments_validate(args: dict[str, object]) -> None:
    lookup.validate(dict(args))


@settings(max_examples=60, deadline=None)
@given(script=model_behaviours(AGENT, unknown_tool=0, invalid_args=0, model_error=0, empty=0, truncated=0))
def test_behaviours_without_faults_call_only_real_tools_validly(script: list[object]) -> None:
    assert isinstance(script[-1], ModelResponse) and script[-1].text == "final answer"
    for reply in script:
        assert isinstance(reply, ModelResponse)
        for call in reply.tool_calls:
            AGENT.tools[call.name].validate(dict(call.args))


@settings(max_examples=30, deadline=None)
@given(script=model_behaviours(AGENT, unknown_tool=1.0, end_with_text=False))
def test_fault_rates_are_honoured(script: list[object]) -> None:
    for reply in script:
        if isinstance(reply, ModelResponse):
            assert all(c.name not in AGENT.tools for c in reply.tool_calls)


@given(budget=limits())
def test_limit_strategy_includes_tiny_budgets(budget: object) -> None:
    assert budget.max_iterations >= 1 and budget.retry_backoff_s == 0  # type: ignore[attr-defined]


def _swap_ids(call: ToolCall, result: ToolResult, ctx: object) -> ToolResult | None:
    """A seeded bug: an after_tool hook that 'normalises' remember's results and loses the id."""
    if call.name == "remember":
        return result.model_copy(update={"call_id": "normalised"})
    return None


BUGGY = AGENT.replace(after_tool=_swap_ids)


def _violates(script: list[object]) -> bool:
    agent = BUGGY.replace(model=ScriptedModel(script))
    try:
        assert_run_invariants(Runner(agent).run_sync("go"), agent, script=script)
    except InvariantViolation:
        return True
    return False


def test_hypothesis_finds_and_shrinks_a_seeded_bug() -> None:
    minimal = find(
        model_behaviours(BUGGY),
        _violates,
        settings=settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), database=None),
    )
    # shrunk to one reply with one call of the broken tool (plus the closing text reply)
    assert len(minimal) == 2
    first = minimal[0]
    assert isinstance(first, ModelResponse) and [c.name for c in first.tool_calls] == ["remember"]
    with pytest.raises(InvariantViolation) as failure:
        agent = BUGGY.replace(model=ScriptedModel(minimal))
        assert_run_invariants(Runner(agent).run_sync("go"), agent)
    message = str(failure.value)
    assert message.startswith("loopwright invariant violated: every tool call answered exactly once")
    assert "trace: start -> preprocess -> reason -> postprocess -> act -> decide" in message
    assert "script (2 replies):\n  1. remember(note=" in message


def test_violation_message_names_the_invariant_the_trace_and_the_script() -> None:
    script = [[ToolCall(name="lookup", args={"city": "Oslo", "nights": 2})], "done"]
    agent = AGENT.replace(model=ScriptedModel(script))
    result = Runner(agent).run_sync("go")
    broken = result.model_copy(update={"trace": [*result.trace[:-1], "decide", "done"]})
    with pytest.raises(InvariantViolation, match="the trace is a path of the machine"):
        assert_run_invariants(broken, agent)
    assert describe_script(agent.model.script) == "  1. lookup(city='Oslo', nights=2)\n  2. text 'done'"  # type: ignore[attr-defined]


def test_scripted_run_fixture(scripted_run: object) -> None:
    result: RunResult = scripted_run(AGENT, [[ToolCall(name="remember", args={"note": "x"})], "ok"])  # type: ignore[operator]
    assert result.outcome == "final" and result.tool_calls == 1


def test_coverage_report_is_exact(pytester: pytest.Pytester) -> None:
    """A hand-counted session: one text reply takes 5 rows of the core's 26."""
    pytester.makepyfile(
        textwrap.dedent(
            """
            from loopwright import Agent, ScriptedModel

            def test_one_reply(scripted_run):
                agent = Agent(name="a", model=ScriptedModel([]))
                assert scripted_run(agent, ["hi"]).outcome == "final"
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--loopwright-cov-fail-under=50")
    missing = [
        "preprocess->cancelled (cancel_requested)",
        "preprocess->failed (has_error)",
        "reason->cancelled (cancel_requested)",
        "reason->decide (deadline_passed)",
        "reason->reason (has_retryable_model_error & retries_left)",
        "reason->reason (has_failed_model & fallback_left)",
        "reason->salvage (request_over_token_budget & salvage_allowed)",
        "reason->done (request_over_token_budget)",
        "reason->done (request_over_cost_budget)",
        "reason->failed (else)",
        "postprocess->cancelled (cancel_requested)",
        "postprocess->act (has_tool_calls)",
        "act->cancelled (cancel_requested)",
        "act->decide (else)",
        "decide->cancelled (cancel_requested)",
        "decide->preprocess (within_iteration_budget & within_tool_call_budget & "
        "within_token_budget & within_cost_budget & within_time_budget)",
        "decide->salvage (salvage_allowed)",
        "decide->done (else)",
        "salvage->cancelled (cancel_requested)",
        "salvage->done (has_response)",
        "salvage->done (else)",
    ]
    expected = f"loopwright coverage: 5/26 rows of 'agent' (missing: {', '.join(missing)})"
    assert expected in result.outlines
    assert "FAIL: row coverage below 50% for ['agent']" in result.outlines
    assert result.ret == 1


@pytest.mark.slow
def test_the_plugin_loads_without_hypothesis() -> None:
    """pytest loads the plugin in every project that installs loopwright, [testing] extra or not."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import loopwright.testing.plugin, loopwright.testing as t\n"
        "print(t.assert_run_invariants.__name__)\n"
        "try:\n    t.model_behaviours\nexcept ImportError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == [
        "assert_run_invariants",
        "loopwright.testing.model_behaviours needs hypothesis: pip install 'loopwright[testing]'",
    ], done.stderr
