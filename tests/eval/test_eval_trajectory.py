"""Trajectory matching: the four modes and their partial score, by example and as properties over
generated trajectories (score 1.0 exactly when the match holds, monotone in the expected calls
matched, EXACT ⊂ IN_ORDER ⊂ ANY_ORDER ⊂ SUBSET)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwright.eval import Call, ExpectedCall, match_trajectory, trajectory_diff
from loopwright.eval.trajectory import MODES, matches

NAMES = ["search", "fetch", "refund"]
calls = st.builds(lambda n, a: Call(n, {"q": a}), st.sampled_from(NAMES), st.integers(0, 2))
expectations = st.builds(
    lambda n, a, how: ExpectedCall(name=n, args={"q": a} if how != "any" else None, args_match=how),
    st.sampled_from(NAMES),
    st.integers(0, 2),
    st.sampled_from(["exact", "subset", "any"]),
)


def exp(name: str, **args: Any) -> ExpectedCall:
    return ExpectedCall(name=name, args=args or None)


def test_each_mode_on_one_trajectory() -> None:
    expected = [exp("search", q=1), exp("fetch", q=2)]
    exact = [Call("search", {"q": 1}), Call("fetch", {"q": 2})]
    extra_between = [Call("search", {"q": 1}), Call("refund", {"q": 0}), Call("fetch", {"q": 2})]
    swapped = [Call("fetch", {"q": 2}), Call("search", {"q": 1})]
    accepted = {
        "exact": (True, False, False),
        "in_order": (True, True, False),
        "any_order": (True, True, True),
        "subset": (True, True, True),
    }
    for mode, want in accepted.items():
        got = tuple(match_trajectory(expected, actual, mode).passed for actual in (exact, extra_between, swapped))
        assert got == want, mode
    assert match_trajectory(expected, swapped, "in_order").score == 0.5  # one of two, in order
    assert match_trajectory(expected, extra_between, "exact").score == 2 / 3  # over the longer trajectory


def test_subset_takes_a_call_expected_twice_made_once() -> None:
    expected = [exp("search", q=1), exp("search", q=1)]
    once = [Call("search", {"q": 1})]
    assert match_trajectory(expected, once, "subset").passed
    assert not match_trajectory(expected, once, "any_order").passed
    assert match_trajectory(expected, once, "any_order").score == 0.5


def test_arguments_by_subset_and_by_predicate() -> None:
    call = Call("refund", {"order": "A1", "amount": 12})
    assert matches(ExpectedCall(name="refund", args={"order": "A1"}, args_match="subset"), call)
    assert not matches(ExpectedCall(name="refund", args={"order": "A1"}), call)  # exact: all of them
    assert matches(ExpectedCall(name="refund", predicate=lambda a: a["amount"] < 20), call)
    assert not matches(ExpectedCall(name="refund", predicate=lambda a: a["amount"] > 20), call)
    assert not matches(ExpectedCall(name="refund", predicate=lambda a: a["missing"]), call)  # raised: no match
    assert matches(ExpectedCall(name="refund", predicate="tests.eval.test_eval_trajectory:small_amount"), call)


def small_amount(args: dict[str, Any]) -> bool:
    return bool(args["amount"] < 20)


def test_the_diff_marks_missing_and_extra_calls() -> None:
    expected = [exp("search", q=1), exp("fetch", q=2)]
    actual = [Call("refund", {"q": 0}), Call("search", {"q": 1})]
    found = match_trajectory(expected, actual, "in_order")
    assert trajectory_diff(expected, actual, found) == ["+ refund(q=0)", "  search(q=1)", "- fetch(q=2)"]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(expectations, max_size=5), st.lists(calls, max_size=6))
def test_score_is_one_exactly_when_the_match_holds_and_modes_nest(
    expected: list[ExpectedCall], actual: list[Call]
) -> None:
    found = {mode: match_trajectory(expected, actual, mode) for mode in MODES}
    for mode, m in found.items():
        assert (m.score == 1.0) == m.passed, mode
        assert 0.0 <= m.score <= 1.0
    accepted = [found[mode].passed for mode in MODES]  # exact, in_order, any_order, subset
    for narrower, wider in itertools.pairwise(accepted):
        assert not narrower or wider, (accepted, expected, actual)


@settings(max_examples=120, deadline=None)
@given(st.lists(expectations, min_size=1, max_size=6), st.data())
def test_score_is_monotone_in_the_expected_calls_matched(expected: list[ExpectedCall], data: st.DataObject) -> None:
    """Making more of the expected calls (in order) never lowers the score; making k of n gives
    at least k/n in the in-order and any-order modes."""
    concrete = [Call(e.name, dict(e.args or {"q": 9})) for e in expected]
    keep = data.draw(st.lists(st.booleans(), min_size=len(expected), max_size=len(expected)))
    fewer = [c for c, k in zip(concrete, keep, strict=True) if k]
    more_keep = [k or data.draw(st.booleans()) for k in keep]
    more = [c for c, k in zip(concrete, more_keep, strict=True) if k]
    for mode in ("in_order", "any_order", "subset"):
        low, high = match_trajectory(expected, fewer, mode).score, match_trajectory(expected, more, mode).score
        assert low <= high, mode
    for mode in ("in_order", "any_order"):
        assert match_trajectory(expected, fewer, mode).score >= sum(keep) / len(expected) - 1e-9
    assert match_trajectory(expected, concrete, "exact").passed
