"""A pytest session started inside a test (``pytest.main``, pytester, an eval runner) counts its own
row coverage and leaves the outer session's installed and whole."""

from __future__ import annotations

from collections import Counter

import pytest

from loopwright import Agent, Runner, ScriptedModel
from loopwright.runtime.observers import INSTRUMENTS
from loopwright.testing import plugin
from loopwright.testing.coverage import coverage

INNER = """
from loopwright import Agent, Runner, ScriptedModel


def test_inner():
    result = Runner(Agent(name="inner", model=ScriptedModel(["hi"]))).run_sync("hello")
    assert result.outcome == "final"
"""


@pytest.mark.slow  # a pytest session in this process (2 s)
def test_a_nested_session_leaves_the_outer_coverage_whole(pytester: pytest.Pytester) -> None:
    if not plugin._installed:
        pytest.skip("the loopwright plugin is off in this session (-p no:loopwright)")
    assert Runner(Agent(name="outer", model=ScriptedModel(["hi"]))).run_sync("hello").outcome == "final"
    before = Counter(coverage.taken)
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")  # in this process
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*loopwright coverage: *rows of*"])  # the inner session reports its own
    assert coverage in INSTRUMENTS, "the nested session uninstalled the outer session's coverage"
    assert all(coverage.taken[row] >= n for row, n in before.items()), "the nested session reset the outer coverage"
    taken = sum(coverage.taken.values())
    assert Runner(Agent(name="outer", model=ScriptedModel(["hi"]))).run_sync("hello").outcome == "final"
    assert sum(coverage.taken.values()) > taken  # still counting


@pytest.mark.slow  # pytest in a subprocess, and pytest.main inside it
def test_the_outer_report_keeps_the_rows_taken_before_a_nested_session(pytester: pytest.Pytester) -> None:
    """Seen as a user sees it: the outer session's report, from a subprocess, after ``pytest.main`` inside a test."""
    pytester.makepyfile(
        test_outer=f'''
import pytest
from loopwright import Agent, Runner, ScriptedModel, ToolCall, tool


@tool
def double(n: int) -> int:
    """Double."""
    return 2 * n


def test_outer(tmp_path):
    agent = Agent(name="outer", model=ScriptedModel([[ToolCall(name="double", args={{"n": 2}})], "4"]), tools=[double])
    assert Runner(agent).run_sync("2?").outcome == "final"
    (tmp_path / "test_inner.py").write_text({INNER!r})
    assert pytest.main([str(tmp_path), "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]) == 0
'''
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    outer = [line for line in result.stdout.lines if "rows of 'loop_detection'" in line]
    assert outer, result.stdout.str()
    assert "postprocess->act (has_tool_calls)" not in outer[-1]  # the outer run's tool call row is still counted
