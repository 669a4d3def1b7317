"""Trajectory matching: the tool calls a run made against the ones a case expects.

Four modes, each accepting everything the one before it accepts
(EXACT ⊂ IN_ORDER ⊂ ANY_ORDER ⊂ SUBSET):

- ``exact``: the expected calls, in that order, and no other call;
- ``in_order``: the expected calls in that order; other calls may come between them;
- ``any_order``: each expected call matched by a call of its own, in any order; others allowed;
- ``subset``: each distinct expected call made at least once (a call expected twice may be
  made once); others allowed.

Beside pass/fail, a **partial score** in [0, 1]: how much of the expected trajectory was
followed (``in_order``: the longest run of expected calls matched in order, over the number
expected; ``exact``: the same over the longer of the two trajectories; ``any_order``: the most
expected calls matched one-to-one; ``subset``: the distinct expected calls made). The score is
1.0 exactly when the match holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .base import Call, resolve
from .expect import ExpectedCall

MatchMode = Literal["exact", "in_order", "any_order", "subset"]
MODES: tuple[MatchMode, ...] = ("exact", "in_order", "any_order", "subset")


def predicate_of(expected: ExpectedCall) -> Callable[[dict[str, Any]], bool] | None:
    predicate = expected.predicate
    if predicate is None:
        return None
    found = resolve(predicate) if isinstance(predicate, str) else predicate
    if not callable(found):
        raise LookupError(f"{predicate!r} names a {type(found).__name__}, not a function of the call's arguments")
    checked: Callable[[dict[str, Any]], bool] = found
    return checked


def matches(expected: ExpectedCall, call: Call) -> bool:
    """Whether ``call`` is the call ``expected`` describes (name, arguments, predicate)."""
    if call.name != expected.name:
        return False
    if expected.args is not None and expected.args_match != "any":
        if expected.args_match == "exact" and call.args != expected.args:
            return False
        if expected.args_match == "subset" and any(
            k not in call.args or call.args[k] != v for k, v in expected.args.items()
        ):
            return False
    predicate = predicate_of(expected)
    if predicate is None:
        return True
    try:
        return bool(predicate(call.args))
    except Exception:  # a predicate that raises on these arguments does not hold
        return False


def _lcs(expected: Sequence[ExpectedCall], actual: Sequence[Call]) -> list[tuple[int, int]]:
    """The longest common subsequence (expected index, actual index) pairs, in order."""
    n, m = len(expected), len(actual)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if matches(expected[i], actual[j]):
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if matches(expected[i], actual[j]) and table[i][j] == table[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _one_to_one(expected: Sequence[ExpectedCall], actual: Sequence[Call]) -> dict[int, int]:
    """The largest matching of expected calls to distinct actual calls (augmenting paths)."""
    edges = [[j for j, call in enumerate(actual) if matches(e, call)] for e in expected]
    owner: dict[int, int] = {}  # actual index -> expected index

    def place(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        place(i, set())
    return {i: j for j, i in owner.items()}


@dataclass(frozen=True, slots=True)
class TrajectoryMatch:
    """How a run's calls met the expected ones: ``passed``, the partial ``score``, and which
    expected call each matched call answered (``pairs``: expected index -> actual index)."""

    mode: MatchMode
    passed: bool
    score: float
    pairs: dict[int, int]


def match_trajectory(expected: Sequence[ExpectedCall], actual: Sequence[Call], mode: MatchMode) -> TrajectoryMatch:
    """Match ``actual`` against ``expected`` in ``mode`` (see the module docstring)."""
    if mode in ("exact", "in_order"):
        pairs = dict(_lcs(expected, actual))
        if mode == "exact":
            longest = max(len(expected), len(actual))
            score = len(pairs) / longest if longest else 1.0
            return TrajectoryMatch(mode, len(pairs) == len(expected) == len(actual), score, pairs)
        score = len(pairs) / len(expected) if expected else 1.0
        return TrajectoryMatch(mode, len(pairs) == len(expected), score, pairs)
    if mode == "any_order":
        pairs = _one_to_one(expected, actual)
        score = len(pairs) / len(expected) if expected else 1.0
        return TrajectoryMatch(mode, len(pairs) == len(expected), score, pairs)
    if mode != "subset":
        raise ValueError(f"unknown trajectory match {mode!r}; use one of {', '.join(MODES)}")
    pairs = {}
    for i, e in enumerate(expected):
        j = next((j for j, call in enumerate(actual) if matches(e, call)), None)
        if j is not None:
            pairs[i] = j
    distinct = {_key(e) for e in expected}
    made = {_key(expected[i]) for i in pairs}
    score = len(made) / len(distinct) if distinct else 1.0
    return TrajectoryMatch(mode, made == distinct, score, pairs)


def _key(e: ExpectedCall) -> str:
    predicate = e.predicate if isinstance(e.predicate, str) or e.predicate is None else id(e.predicate)
    return json.dumps([e.name, e.args, e.args_match, predicate], sort_keys=True, default=str)


def trajectory_diff(expected: Sequence[ExpectedCall], actual: Sequence[Call], found: TrajectoryMatch) -> list[str]:
    """The two trajectories side by side, one line each: ``  call`` matched, ``- call``
    expected but not made (or not where it should be), ``+ call`` made but not expected."""
    by_actual = {j: i for i, j in found.pairs.items()}
    lines: list[str] = []
    next_expected = 0
    for j, call in enumerate(actual):
        if j in by_actual:
            i = by_actual[j]
            if found.mode in ("exact", "in_order"):
                lines += [f"- {expected[k].label()}" for k in range(next_expected, i) if k not in found.pairs]
                next_expected = i + 1
            lines.append(f"  {call.label()}")
        else:
            lines.append(f"+ {call.label()}")
    start = next_expected if found.mode in ("exact", "in_order") else 0
    lines += [f"- {expected[k].label()}" for k in range(start, len(expected)) if k not in found.pairs]
    return lines


__all__ = ["MODES", "MatchMode", "TrajectoryMatch", "match_trajectory", "matches", "trajectory_diff"]
